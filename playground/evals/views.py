"""Evaluation pages: thin views over the evals services and selectors.

Every lookup goes through a selector scoped to the user's teams, so another team's dataset or
experiment is a 404 on every path; viewers read, members and above run.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRefresh

from playground.accounts.permissions import team_ids_can_run, user_can_run
from playground.accounts.selectors import team_list_for_user
from playground.chat.compare.choices import target_choices
from playground.evals.forms import (
    CONNECTION_SLOTS,
    ConnectionTargetForm,
    DatasetCreateForm,
    DatasetItemForm,
    DatasetUploadForm,
    ExperimentCreateForm,
)
from playground.evals.models import Dataset, Experiment
from playground.evals.results import (
    ROWS_PER_PAGE,
    check_labels,
    experiment_export_page,
    experiment_rows,
    experiment_summaries,
    winner_line,
)
from playground.evals.selectors import (
    dataset_get,
    dataset_items_page,
    dataset_list,
    experiment_get,
    experiment_list,
)
from playground.evals.services.datasets import (
    DatasetNotFound,
    dataset_create,
    dataset_item_add,
    dataset_item_remove,
    dataset_upload,
    dataset_upload_confirm,
    dataset_upload_discard,
)
from playground.evals.services.experiments import (
    ExperimentNotFound,
    experiment_cancel,
    experiment_create,
    experiment_nudge,
    experiment_start,
)
from playground.lib.web import HtmxHttpRequest, form_errors_add, refusal
from playground.presets.selectors import team_version_choices
from playground.providers.selectors import connection_list_runnable

EXPORT_PAGE = 500
CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def evals_home_view(request: HtmxHttpRequest) -> HttpResponse:
    runnable = team_ids_can_run(user=request.user)
    teams = [(team.pk, team.name) for team in team_list_for_user(user=request.user) if team.pk in runnable]
    form = DatasetCreateForm(request.POST or None, teams=teams)
    if request.method == "POST" and form.is_valid():
        try:
            dataset = dataset_create(
                user=request.user, team_id=form.cleaned_data["team"], name=form.cleaned_data["name"]
            )
            return redirect("evals:dataset-detail", dataset.pk)
        except ValidationError as exc:
            form_errors_add(form, exc)
    context = {
        "datasets": dataset_list(user=request.user),
        "experiments": experiment_list(user=request.user)[:50],
        "form": form,
        "can_create": bool(teams),
    }
    return render(request, "evals/home.html", context)


@never_cache
@login_required
@require_GET
def dataset_detail_view(request: HtmxHttpRequest, dataset_id: int) -> HttpResponse:
    dataset = _dataset_or_404(request, dataset_id)
    return _dataset_page(request, dataset)


def _dataset_page(
    request: HtmxHttpRequest, dataset: Dataset, status: int = 200, **forms: object
) -> HttpResponse:
    shown = request.GET.get("version", "")
    version = int(shown) if shown.isdigit() and 0 < int(shown) <= dataset.version else dataset.version
    context = {
        "dataset": dataset,
        "version": version,
        "versions": dataset.versions.all()[:20],
        "items": dataset_items_page(dataset=dataset, version=version, page=request.GET.get("page")),
        "uploads": dataset.uploads.order_by("-created_at"),
        "can_run": user_can_run(user=request.user, team_id=dataset.team_id),
        "upload_form": forms.get("upload_form") or DatasetUploadForm(),
        "item_form": forms.get("item_form") or DatasetItemForm(),
        "experiment_form": forms.get("experiment_form")
        or ExperimentCreateForm(versions=team_version_choices(team_id=dataset.team_id)),
        "connection_forms": forms.get("connection_forms") or _connection_forms(request, dataset),
        "experiments": dataset.experiments.all()[:20],
    }
    return render(request, "evals/dataset_detail.html", context, status=status)


@login_required
@require_POST
def dataset_upload_view(request: HtmxHttpRequest, dataset_id: int) -> HttpResponse:
    dataset = _dataset_or_404(request, dataset_id)
    form = DatasetUploadForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data["file"]
        kind = "csv" if upload.name.lower().endswith(".csv") else "jsonl"
        try:
            dataset_upload(
                user=request.user, dataset_id=dataset.pk, file_name=upload.name, kind=kind, stream=upload
            )
            return redirect("evals:dataset-detail", dataset.pk)
        except DatasetNotFound:
            raise Http404 from None
        except ValidationError as exc:
            form_errors_add(form, exc)
    return _dataset_page(request, dataset, status=400, upload_form=form)


@login_required
@require_POST
def dataset_upload_action_view(
    request: HtmxHttpRequest, dataset_id: int, upload_id: int, action: str
) -> HttpResponse:
    dataset = _dataset_or_404(request, dataset_id)
    try:
        if action == "confirm":
            dataset_upload_confirm(user=request.user, upload_id=upload_id)
        elif action == "discard":
            dataset_upload_discard(user=request.user, upload_id=upload_id)
        else:
            raise Http404
    except DatasetNotFound:
        raise Http404 from None
    return redirect("evals:dataset-detail", dataset.pk)


@login_required
@require_POST
def dataset_item_add_view(request: HtmxHttpRequest, dataset_id: int) -> HttpResponse:
    dataset = _dataset_or_404(request, dataset_id)
    form = DatasetItemForm(request.POST)
    if form.is_valid():
        try:
            dataset_item_add(user=request.user, dataset_id=dataset.pk, fields=form.item)
        except DatasetNotFound:
            raise Http404 from None
        return redirect("evals:dataset-detail", dataset.pk)
    return _dataset_page(request, dataset, status=400, item_form=form)


@login_required
@require_POST
def dataset_item_remove_view(request: HtmxHttpRequest, dataset_id: int, item_id: int) -> HttpResponse:
    dataset = _dataset_or_404(request, dataset_id)
    try:
        dataset_item_remove(user=request.user, dataset_id=dataset.pk, item_id=item_id)
    except DatasetNotFound:
        raise Http404 from None
    return redirect("evals:dataset-detail", dataset.pk)


@login_required
@require_POST
def experiment_create_view(request: HtmxHttpRequest, dataset_id: int) -> HttpResponse:
    dataset = _dataset_or_404(request, dataset_id)
    form = ExperimentCreateForm(request.POST, versions=team_version_choices(team_id=dataset.team_id))
    slots = _connection_forms(request, dataset, data=request.POST)
    if all([form.is_valid(), *(slot.is_valid() for slot in slots)]):
        try:
            experiment = experiment_create(
                user=request.user,
                dataset_id=dataset.pk,
                preset_version_ids=sorted(form.cleaned_data["versions"]),  # the oldest first: the baseline
                connection_targets=[t for slot in slots if (t := slot.connection_target()) is not None],
                checks=form.cleaned_data["checks"],
                name=form.cleaned_data["name"],
            )
            return redirect("evals:experiment-detail", experiment.pk)
        except ExperimentNotFound:
            raise Http404 from None
        except ValidationError as exc:
            form_errors_add(form, exc)
    return _dataset_page(request, dataset, status=400, experiment_form=form, connection_forms=slots)


def _connection_forms(
    request: HtmxHttpRequest, dataset: Dataset, data: Any = None
) -> list[ConnectionTargetForm]:
    """The form's connection target slots: every model of the dataset's team's connections that
    the user may run (another team's, or one a viewer holds, is never offered)."""
    connections = list(connection_list_runnable(user=request.user).filter(team_id=dataset.team_id))
    choices = target_choices(connections)
    return [
        ConnectionTargetForm(data, prefix=f"c{slot}", targets=choices) for slot in range(CONNECTION_SLOTS)
    ]


@never_cache
@login_required
@require_GET
def experiment_detail_view(request: HtmxHttpRequest, experiment_id: int) -> HttpResponse:
    experiment = _experiment_or_404(request, experiment_id)
    summaries = experiment_summaries(experiment=experiment)
    pages = Paginator(range(experiment.item_count), ROWS_PER_PAGE).get_page(request.GET.get("page"))
    start = (pages.number - 1) * ROWS_PER_PAGE
    context = {
        "experiment": experiment,
        "summaries": summaries,
        "winner": winner_line(summaries),
        "labels": check_labels(experiment),
        "rows": experiment_rows(experiment=experiment, start=start, stop=start + ROWS_PER_PAGE),
        "pages": pages,
        # Polled while answers or verdicts are still to come (judges run after the answers).
        "running": experiment.started_at is not None
        and any(s.open or s.unscored or s.judging for s in summaries),
        "can_run": user_can_run(user=request.user, team_id=experiment.team_id),
        "records": sum(s.records for s in summaries),
    }
    return render(request, "evals/experiment_detail.html", context)


@never_cache
@login_required
@require_POST
def experiment_progress_view(request: HtmxHttpRequest, experiment_id: int) -> HttpResponse:
    """The page's poll while targets run: a POST, because a stalled chain is restarted here."""
    experiment = _experiment_or_404(request, experiment_id)
    experiment_nudge(experiment=experiment)
    return HttpResponseClientRefresh()


@login_required
@require_POST
def experiment_action_view(request: HtmxHttpRequest, experiment_id: int, action: str) -> HttpResponse:
    experiment = _experiment_or_404(request, experiment_id)
    try:
        if action == "start":
            experiment_start(user=request.user, experiment_id=experiment.pk)
        elif action == "cancel":
            experiment_cancel(user=request.user, experiment_id=experiment.pk)
            if experiment.started_at is None:
                return redirect("evals:dataset-detail", experiment.dataset_id)
        else:
            raise Http404
    except ExperimentNotFound:
        raise Http404 from None
    except ValidationError as exc:
        return refusal(request, " ".join(exc.messages))
    return redirect("evals:experiment-detail", experiment.pk)


@login_required
@require_GET
def experiment_export_view(request: HtmxHttpRequest, experiment_id: int, fmt: str) -> StreamingHttpResponse:
    experiment = _experiment_or_404(request, experiment_id)
    if fmt not in ("csv", "jsonl"):
        raise Http404("Results come as .jsonl or .csv.")
    stream = _csv_stream(experiment) if fmt == "csv" else _jsonl_stream(experiment)
    kind = "text/csv" if fmt == "csv" else "application/x-ndjson"
    response = StreamingHttpResponse(stream, content_type=f"{kind}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="experiment-{experiment.pk}.{fmt}"'
    return response


async def _rows(experiment: Experiment) -> AsyncIterator[dict[str, Any]]:
    """A page of items at a time (async: under ASGI a sync iterator would be read whole first)."""
    for start in range(0, experiment.item_count, EXPORT_PAGE):
        page = await sync_to_async(experiment_export_page)(
            experiment=experiment, start=start, stop=start + EXPORT_PAGE
        )
        for row in page:
            yield row


async def _jsonl_stream(experiment: Experiment) -> AsyncIterator[str]:
    async for row in _rows(experiment):
        yield json.dumps(row, ensure_ascii=False) + "\n"


async def _csv_stream(experiment: Experiment) -> AsyncIterator[str]:
    buffer = io.StringIO()
    writer: csv.DictWriter[str] | None = None
    async for row in _rows(experiment):
        if writer is None:
            writer = csv.DictWriter(buffer, fieldnames=list(row))
            writer.writeheader()
        # A cell a spreadsheet would run as a formula is written as text.
        writer.writerow({key: _cell(value) for key, value in row.items()})
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()


def _cell(value: Any) -> Any:
    return f"'{value}" if isinstance(value, str) and value.startswith(CSV_FORMULA_STARTS) else value


def _dataset_or_404(request: HtmxHttpRequest, dataset_id: int) -> Dataset:
    dataset = dataset_get(user=request.user, dataset_id=dataset_id)
    if dataset is None:
        raise Http404
    return dataset


def _experiment_or_404(request: HtmxHttpRequest, experiment_id: int) -> Experiment:
    experiment = experiment_get(user=request.user, experiment_id=experiment_id)
    if experiment is None:
        raise Http404
    return experiment
