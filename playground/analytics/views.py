"""Analytics pages: thin views over `filters`, `selectors`/`records`, `charts` and `exports`.

Every view resolves the team through `filters_from_query`, which only accepts one of the
signed-in user's teams: another team's id is a 404 on the dashboard, each chart fragment,
the log, the detail page and every export.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from playground.accounts.selectors import team_list_for_user
from playground.analytics import charts, exports, selectors
from playground.analytics.filters import GROUPS, FilterError, FilterForm, Filters, filters_from_query
from playground.analytics.presenters import batch_item_link, cost_formula, source_link
from playground.analytics.records import BadCursor, log_page, usage_record_get
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageTeamDaily


class FigureEncoder(json.JSONEncoder):
    """Plotly wants numbers: Decimals become floats (tables keep the exact Decimals)."""

    def default(self, o: object) -> object:
        if isinstance(o, Decimal):
            return float(o)
        if isinstance(o, dt.datetime | dt.date):
            return o.isoformat()
        return super().default(o)


class AuthedRequest(HttpRequest):
    user: User


@dataclass(frozen=True)
class ChartSpec:
    title: str
    build: Callable[[Filters, QueryDict], charts.Chart]


def _cost(filters: Filters, query: QueryDict) -> charts.Chart:
    return charts.cost_over_time(
        selectors.cost_by_group(filters),
        buckets=selectors.buckets(filters),
        group_label=GROUPS[filters.group],
    )


def _what_if(filters: Filters, query: QueryDict) -> charts.Chart:
    target = selectors.what_if_target(query.get("card", "")) or selectors.what_if_targets()[0]
    return charts.what_if(selectors.what_if(filters, target=target), target_label=target.label)


CHARTS: dict[str, ChartSpec] = {
    "cost": ChartSpec("Cost over time", _cost),
    "tokens": ChartSpec(
        "Input tokens: fresh and cached",
        lambda f, q: charts.tokens_fresh_vs_cached(
            selectors.tokens_over_time(f), buckets=selectors.buckets(f)
        ),
    ),
    "cache-ratio": ChartSpec(
        "Cache hit ratio: affinity on and off",
        lambda f, q: charts.cache_hit_ratio(
            selectors.cache_ratio_by_affinity(f), buckets=selectors.buckets(f)
        ),
    ),
    "savings": ChartSpec(
        "Savings from caching",
        lambda f, q: charts.savings(selectors.savings_over_time(f), buckets=selectors.buckets(f)),
    ),
    "ttft": ChartSpec(
        "Time to first token: cache hit and miss",
        lambda f, q: charts.ttft_by_cache(
            selectors.ttft_percentiles_by_cache(f), buckets=selectors.buckets(f)
        ),
    ),
    "latency": ChartSpec(
        "Latency distribution", lambda f, q: charts.latency_distribution(selectors.latency_distribution(f))
    ),
    "status": ChartSpec(
        "Requests by status",
        lambda f, q: charts.requests_by_status(selectors.requests_by_status(f), buckets=selectors.buckets(f)),
    ),
    "top-conversations": ChartSpec(
        "Top conversations by cost", lambda f, q: charts.top_conversations(selectors.top_conversations(f))
    ),
    "prompt-growth": ChartSpec(
        "Prompt tokens per turn: top sessions", lambda f, q: charts.prompt_growth(selectors.prompt_growth(f))
    ),
    "what-if": ChartSpec("What-if re-pricing", _what_if),
}


def _filters(request: AuthedRequest) -> tuple[Filters | None, FilterForm]:
    """The filters and the bound form; a foreign team raises Http404, bad input FilterError."""
    form = FilterForm(request.GET)
    return filters_from_query(user=request.user, query=request.GET), form


def _choices(filters: Filters) -> dict[str, Any]:
    """What the filter pickers offer: the team's models, members and connections."""
    team = filters.team
    return {
        "model_options": list(
            UsageTeamDaily.objects.filter(team=team)
            .values_list("model_id", flat=True)
            .distinct()
            .order_by("model_id")
        ),
        "user_options": list(
            User.objects.filter(memberships__team=team).order_by("username").values_list("pk", "username")
        ),
        "connection_options": list(
            ProviderConnection.objects.filter(team=team).order_by("name").values_list("pk", "name")
        ),
    }


def _page_context(request: AuthedRequest, filters: Filters | None, form: FilterForm) -> dict[str, Any]:
    context: dict[str, Any] = {
        "form": form,
        "filters": filters,
        "teams": team_list_for_user(user=request.user),
        "query": request.GET.urlencode(),
        "now": timezone.now(),
    }
    if filters is not None:
        context.update(_choices(filters))
    return context


def _invalid(request: AuthedRequest, template: str, error: FilterError) -> HttpResponse:
    context = {
        "form": error.form,
        "filters": None,
        "teams": team_list_for_user(user=request.user),
        "errors": True,
    }
    return render(request, template, context, status=400)


@never_cache
@login_required
@require_GET
def dashboard_view(request: AuthedRequest) -> HttpResponse:
    try:
        filters, form = _filters(request)
    except FilterError as error:
        return _invalid(request, "analytics/dashboard.html", error)
    context = _page_context(request, filters, form)
    context["charts"] = [{"name": name, "title": spec.title} for name, spec in CHARTS.items()]
    context["what_if_targets"] = selectors.what_if_targets()
    return render(request, "analytics/dashboard.html", context)


@never_cache
@login_required
@require_GET
def chart_view(request: AuthedRequest, name: str) -> HttpResponse:
    spec = CHARTS.get(name)
    if spec is None:
        raise Http404("No such chart.")
    try:
        filters = filters_from_query(user=request.user, query=request.GET)
    except FilterError as error:
        return HttpResponse(
            f"Invalid filters: {'; '.join(str(m) for m in error.form.errors.values())}",
            status=400,
            content_type="text/plain",
        )
    if filters is None:
        raise Http404("You are in no team.")
    chart = spec.build(filters, request.GET)
    context = {
        "name": name,
        "title": spec.title,
        "chart": chart,
        # In a data attribute, escaped by the template (htmx drops <script> elements it swaps in).
        "figure_json": json.dumps(chart.figure, cls=FigureEncoder),
        "query": request.GET.urlencode(),
        "filters": filters,
        "groups": GROUPS,
        "what_if_targets": selectors.what_if_targets() if name == "what-if" else [],
        "what_if_selected": request.GET.get("card", ""),
    }
    return render(request, "analytics/chart.html", context)


@never_cache
@login_required
@require_GET
def log_view(request: AuthedRequest) -> HttpResponse:
    try:
        filters, form = _filters(request)
    except FilterError as error:
        return _invalid(request, "analytics/log.html", error)
    context = _page_context(request, filters, form)
    if filters is not None:
        try:
            page = log_page(filters, cursor=request.GET.get("after", ""))
        except BadCursor:
            return HttpResponse("That page link is not valid: start again from the first page.", status=400)
        next_query = request.GET.copy()
        next_query["after"] = page.next_cursor
        first_query = request.GET.copy()
        first_query.pop("after", None)
        context.update(
            {
                "page": page,
                "rows": [(record, batch_item_link(record.source)) for record in page.records],
                "next_query": next_query.urlencode() if page.next_cursor else "",
                "first_query": first_query.urlencode(),
                "is_first_page": not request.GET.get("after"),
            }
        )
    return render(request, "analytics/log.html", context)


@never_cache
@login_required
@require_GET
def record_detail_view(request: AuthedRequest, request_id: uuid.UUID) -> HttpResponse:
    record = usage_record_get(user=request.user, request_id=str(request_id))
    if record is None:
        raise Http404("No such usage record.")
    context = {
        "record": record,
        "formula": cost_formula(record),
        "source": source_link(record),
        "raw_usage": json.dumps(record.raw_usage, indent=2, ensure_ascii=False) if record.raw_usage else "",
        "request_body": json.dumps(record.request_body, indent=2, ensure_ascii=False)
        if record.request_body
        else "",
        "teams": team_list_for_user(user=request.user),
    }
    return render(request, "analytics/detail.html", context)


EXPORT_TYPES = {
    "csv": ("text/csv; charset=utf-8", "csv"),
    "jsonl": ("application/x-ndjson; charset=utf-8", "jsonl"),
    "xlsx": ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "xlsx"),
}


@never_cache
@login_required
@require_GET
def export_view(request: AuthedRequest, fmt: str) -> HttpResponse | StreamingHttpResponse:
    if fmt not in EXPORT_TYPES:
        raise Http404("No such export format.")
    try:
        filters = filters_from_query(user=request.user, query=request.GET)
    except FilterError as error:
        return HttpResponse(
            f"Invalid filters: {'; '.join(str(m) for m in error.form.errors.values())}",
            status=400,
            content_type="text/plain",
        )
    if filters is None:
        raise Http404("You are in no team.")
    content_type, extension = EXPORT_TYPES[fmt]
    if fmt == "csv":
        stream = exports.csv_stream(filters, bom=request.GET.get("bom") == "1")
    elif fmt == "jsonl":
        stream = exports.jsonl_stream(filters)
    else:
        stream = exports.xlsx_stream(filters)
    response = StreamingHttpResponse(stream, content_type=content_type)
    stamp = timezone.now().strftime("%Y%m%d-%H%M")
    response["Content-Disposition"] = f'attachment; filename="usage-{filters.team.slug}-{stamp}.{extension}"'
    return response
