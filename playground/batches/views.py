"""Batch pages: thin views over the batch services and selectors.

Every lookup goes through `batch_get`, scoped to the user's teams, so another team's batch
is a 404 on every path; viewers read, members and above run. Results stream as JSONL or CSV
(async iterators: under ASGI a sync iterator would be read whole before sending).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRefresh

from playground.accounts.permissions import user_can_run
from playground.batches.forms import BatchCreateForm, upload_limit_text
from playground.batches.inputs import Shared, utf8_lines
from playground.batches.models import Batch, BatchStatus, ItemState
from playground.batches.selectors import (
    BudgetFit,
    batch_budget_fit,
    batch_get,
    batch_item_find,
    batch_item_get,
    batch_items_page,
    batch_list,
    batch_progress,
    batch_result_rows,
)
from playground.batches.services.actions import (
    BatchNotFound,
    batch_cancel,
    batch_confirm,
    batch_discard,
    batch_retry_failed,
)
from playground.batches.services.chain import batch_nudge_if_stalled
from playground.batches.services.drafts import (
    BatchEstimate,
    BatchInput,
    BatchInputInvalid,
    batch_draft_create,
    batch_estimate_today,
)
from playground.lib.web import HtmxHttpRequest, form_errors_add, refusal
from playground.presets.request_presets import preset_choices
from playground.presets.selectors import preset_version_choices
from playground.providers.models import ProviderConnection
from playground.providers.selectors import connection_list_runnable
from playground.usage.sources import CONVERSATION

EXPORT_PAGE = 500
CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def batch_list_view(request: HtmxHttpRequest) -> HttpResponse:
    connections = _runnable_connections(request.user)
    conversations = preset_choices(kind=CONVERSATION, user=request.user)
    versions = preset_version_choices(user=request.user)
    if request.method == "GET":
        initial = {
            field: int(chosen)
            for field in ("preset_version", "conversation")
            if (chosen := request.GET.get(field, "")).isdigit()
        }
        form = BatchCreateForm(
            connections=connections, conversations=conversations, preset_versions=versions, initial=initial
        )
        return _list_page(request, form, connections)
    form = BatchCreateForm(
        request.POST,
        request.FILES,
        connections=connections,
        conversations=conversations,
        preset_versions=versions,
    )
    errors: list[str] = []
    error_count = 0
    if form.is_valid():
        data = form.cleaned_data
        try:
            batch = batch_draft_create(
                user=request.user,
                connection_id=data["connection"],
                model_id=data["model_id"],
                name=data["name"],
                from_conversation_id=data["conversation"],
                preset_version_id=data["preset_version"],
                source=BatchInput(
                    kind=data["input_kind"],
                    stream=data["file"] or utf8_lines(data["text"]),
                    template=data["template"],
                    shared=Shared(system_prompt=data["system_prompt"]),
                ),
            )
        except BatchInputInvalid as exc:
            errors, error_count = [str(error) for error in exc.errors], exc.error_count
        except ValidationError as exc:
            form_errors_add(form, exc)
        except PermissionDenied as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("batches:batch-detail", batch_id=batch.pk)
    return _list_page(request, form, connections, line_errors=errors, error_count=error_count, status=400)


@never_cache
@login_required
@require_GET
def batch_detail_view(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    batch = _batch_or_404(request, batch_id)
    state = request.GET.get("state", "")
    estimate = batch_estimate_today(batch=batch)
    draft = batch.status == BatchStatus.DRAFT
    context = {
        "batch": batch,
        "estimate": estimate,
        "budget": _budget_fit(batch, estimate) if draft else None,
        "progress": batch_progress(batch=batch),
        "can_run": user_can_run(user=request.user, team_id=batch.team_id),
        "items": batch_items_page(batch=batch, state=state if state in ItemState.values else ""),
        "state_filter": state,
        "states": ItemState.choices,
    }
    return render(request, "batches/batch_detail.html", context)


def _budget_fit(batch: Batch, estimate: BatchEstimate) -> BudgetFit | None:
    cost = estimate.get("cost")
    return batch_budget_fit(batch=batch, cost=Decimal(cost) if cost else None)


@never_cache
@login_required
@require_POST
def batch_progress_view(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    """The detail page's progress poll: a POST, because a chain that has visibly stalled is taken
    over here (someone is waiting on it), and a GET must not start one."""
    batch = _batch_or_404(request, batch_id)
    if batch_nudge_if_stalled(batch=batch):
        batch.refresh_from_db()
    if batch.finished_at:  # the whole page changes (actions, item states): load it again, once
        return HttpResponseClientRefresh()
    context = {"batch": batch, "progress": batch_progress(batch=batch)}
    return render(request, "batches/batch_detail.html#progress", context)


@login_required
@require_POST
def batch_action_view(request: HtmxHttpRequest, batch_id: int, action: str) -> HttpResponse:
    actions = {
        "confirm": batch_confirm,
        "cancel": batch_cancel,
        "retry": batch_retry_failed,
        "discard": batch_discard,
    }
    if action not in actions:
        raise Http404("No such action.")
    try:
        actions[action](user=request.user, batch_id=batch_id)
    except BatchNotFound:
        raise Http404("No such batch.") from None
    except ValidationError as exc:
        return refusal(request, " ".join(exc.messages))
    cancelled_draft = action == "cancel" and batch_get(user=request.user, batch_id=batch_id) is None
    if action == "discard" or cancelled_draft:
        return redirect("batches:batch-list")
    return redirect("batches:batch-detail", batch_id=batch_id)


@never_cache
@login_required
@require_GET
def batch_item_view(request: HtmxHttpRequest, batch_id: int, index: int) -> HttpResponse:
    batch = _batch_or_404(request, batch_id)
    item = batch_item_get(batch=batch, index=index)
    if item is None:
        raise Http404("No such item.")
    context = {
        "batch": batch,
        "item": item,
        "request_json": json.dumps(item.request, indent=2, ensure_ascii=False),
        "response_json": json.dumps(item.response, indent=2, ensure_ascii=False) if item.response else "",
        "record": item.usage_record,
    }
    return render(request, "batches/batch_item.html", context)


@login_required
@require_GET
def batch_item_by_id_view(request: HtmxHttpRequest, item_id: int) -> HttpResponse:
    item = batch_item_find(user=request.user, item_id=item_id)
    if item is None:
        raise Http404("No such item.")
    return redirect("batches:batch-item", batch_id=item.batch_id, index=item.index)


@login_required
@require_GET
def batch_results_view(request: HtmxHttpRequest, batch_id: int, fmt: str) -> StreamingHttpResponse:
    batch = _batch_or_404(request, batch_id)
    if fmt not in ("jsonl", "csv"):
        raise Http404("Results come as .jsonl or .csv.")
    if fmt == "jsonl":
        response = StreamingHttpResponse(
            _jsonl_stream(batch), content_type="application/x-ndjson; charset=utf-8"
        )
    else:
        response = StreamingHttpResponse(_csv_stream(batch), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="batch-{batch.pk}-results.{fmt}"'
    return response


# --- exports -------------------------------------------------------------------------------


async def _rows(batch: Batch) -> AsyncIterator[dict[str, Any]]:
    rows = batch_result_rows(batch=batch)
    while page := await sync_to_async(_take)(rows, EXPORT_PAGE):
        for row in page:
            yield row


def _take(rows: Any, count: int) -> list[dict[str, Any]]:
    page = []
    for row in rows:
        page.append(row)
        if len(page) >= count:
            break
    return page


async def _jsonl_stream(batch: Batch) -> AsyncIterator[str]:
    async for row in _rows(batch):
        yield json.dumps(row, ensure_ascii=False) + "\n"


CSV_COLUMNS = [
    "index", "line", "external_reference", "state", "attempt", "prompt", "output", "tool_calls",
    "finish_reason", "prompt_tokens", "cached_tokens", "completion_tokens", "total_cost", "error",
]  # fmt: skip


async def _csv_stream(batch: Batch) -> AsyncIterator[str]:
    yield _csv_line(CSV_COLUMNS)
    async for row in _rows(batch):
        output = row["output"] or {}
        usage = row["usage"] or {}
        messages = row["input"].get("messages") or [{}]
        prompt = messages[-1].get("content")
        yield _csv_line(
            [
                row["index"],
                row["line"],
                row["external_reference"],
                row["state"],
                row["attempt"],
                prompt if isinstance(prompt, str) else json.dumps(prompt),
                output.get("text", ""),
                json.dumps(output["tool_calls"]) if output.get("tool_calls") else "",
                output.get("finish_reason", ""),
                usage.get("prompt_tokens", ""),
                "" if usage.get("cached_tokens") is None else usage["cached_tokens"],
                usage.get("completion_tokens", ""),
                usage.get("total_cost", ""),
                row["error"] or "",
            ]
        )


def _csv_line(cells: list[Any]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow([csv_safe(cell) for cell in cells])
    return buffer.getvalue()


def csv_safe(cell: Any) -> Any:
    """A text cell a spreadsheet would run as a formula gets a leading quote (CSV injection)."""
    if isinstance(cell, str) and cell.startswith(CSV_FORMULA_STARTS):
        return "'" + cell
    return cell


# --- helpers -------------------------------------------------------------------------------


def _batch_or_404(request: HtmxHttpRequest, batch_id: int) -> Batch:
    batch = batch_get(user=request.user, batch_id=batch_id)
    if batch is None:
        raise Http404("No such batch.")
    return batch


def _runnable_connections(user: User) -> list[ProviderConnection]:
    return list(connection_list_runnable(user=user))


def _list_page(
    request: HtmxHttpRequest,
    form: BatchCreateForm,
    connections: list[ProviderConnection],
    *,
    line_errors: list[str] | None = None,
    error_count: int = 0,
    status: int = 200,
) -> HttpResponse:
    batches = list(batch_list(user=request.user).exclude(status=BatchStatus.DRAFT)[:100])
    context = {
        "form": form,
        "rows": [(batch, batch_progress(batch=batch, now=timezone.now())) for batch in batches],
        "has_connections": bool(connections),
        "line_errors": line_errors or [],
        "error_count": error_count,
        "upload_limit": upload_limit_text(),
    }
    return render(request, "batches/batch_list.html", context, status=status)
