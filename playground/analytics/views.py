"""Analytics pages: thin views over `filters`, `selectors` (the log: `request_log`), `charts` and `exports`.

Every view resolves the team through `filters_from_query`, which only accepts one of the
signed-in user's teams: another team's id is a 404 on the dashboard, each chart fragment,
the log, the detail page and every export.

The dashboard and the log keep every control in their URL: the filter form is a GET form
that htmx sends on each change (static/js/analytics.js), swapping in the page's `analytics`
partial and pushing its URL; the cost grouping and the what-if card are chosen in their
chart's fragment, which then pushes the dashboard's URL with the choice (`CHOICES`).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from django_htmx.http import push_url

from playground.accounts.selectors import team_list_for_user
from playground.analytics import charts, exports, focus
from playground.analytics.filters import GROUPS, FilterError, FilterForm, Filters, filters_from_query
from playground.analytics.presenters import (
    HEADLINE_BY_ATTRIBUTION,
    NOT_BY_ATTRIBUTION,
    attribution_tiles,
    attribution_unserved,
    conformance_lines,
    cost_formula,
    headline_tiles,
    record_attribution,
    record_redactions,
)
from playground.analytics.routing_view import record_routing
from playground.analytics.score_views import scores_context
from playground.analytics.selectors.attribution import cost_by_end_user, cost_by_key
from playground.analytics.selectors.cache_breaks import cache_breaks_over_time
from playground.analytics.selectors.chart_series import (
    cache_ratio_by_affinity,
    cost_by_group,
    latency_distribution,
    requests_by_status,
    savings_over_time,
    tokens_over_time,
    ttft_percentiles_by_cache,
)
from playground.analytics.selectors.conformance import ERROR_PATHS_FROM, schema_conformance
from playground.analytics.selectors.conversations import prompt_growth, top_conversations
from playground.analytics.selectors.focus import focus_unserved
from playground.analytics.selectors.hit_ratio import ROWS_READ, SESSIONS_READ, hit_ratios
from playground.analytics.selectors.presets import cost_by_preset_version, preset_rows_unserved
from playground.analytics.selectors.redactions import redactions_over_time
from playground.analytics.selectors.request_log import BadCursor, log_page, usage_record_get
from playground.analytics.selectors.rollups import buckets, chart_period, filter_choices
from playground.analytics.selectors.routing_outcomes import TAGGED_FROM, routing_outcomes
from playground.analytics.selectors.runway import CANDIDATES, sessions_near_limit
from playground.analytics.selectors.scores import scores_by_preset_version
from playground.analytics.selectors.session_labels import session_labels
from playground.analytics.selectors.totals import attribution_totals, headline, log_totals
from playground.analytics.selectors.what_if import what_if, what_if_target, what_if_targets
from playground.analytics.table_html import table_body
from playground.lib.web import HtmxHttpRequest, refusal
from playground.presets.selectors import preset_version_labels, preset_version_ref
from playground.usage.insights.cache_break_selectors import break_shown
from playground.usage.insights.cache_break_store import record_break
from playground.usage.models import UsageRecord
from playground.usage.scores import score_summaries
from playground.usage.sources import record_source_links


class FigureEncoder(json.JSONEncoder):
    """Plotly wants numbers: Decimals become floats (tables keep the exact Decimals)."""

    def default(self, o: object) -> object:
        if isinstance(o, Decimal):
            return float(o)
        if isinstance(o, dt.datetime | dt.date):
            return o.isoformat()
        return super().default(o)


@dataclass(frozen=True)
class ChartSpec:
    title: str
    build: Callable[[Filters, QueryDict], charts.Chart]
    over_time: bool = True  # drawn over `chart_period`, not always the whole period
    # Reads the rollups by API key and end user (`selectors.attribution`), not the others.
    by_attribution: bool = False
    # Reads the rollups by preset version (`selectors.presets`).
    by_preset: bool = False
    # Reads the records, narrowed by the log's own filters (`selectors.redactions`): answers any filter.
    by_records: bool = False
    # Reads the scores, narrowed by the log's own filters (`selectors.scores`): answers any filter.
    by_scores: bool = False

    def unavailable(self, filters: Filters) -> str:
        """Why this chart's rollups cannot answer the filters ("" when they can)."""
        if self.by_records:
            return ""
        if self.by_scores:
            return ""
        if self.by_preset:
            return preset_rows_unserved(filters)
        if self.by_attribution:
            return attribution_unserved(filters)
        return NOT_BY_ATTRIBUTION if filters.by_attribution else ""


def _cost(filters: Filters, query: QueryDict) -> charts.Chart:
    return charts.cost_over_time(
        cost_by_group(filters),
        buckets=buckets(filters),
        group_label=GROUPS[filters.group],
    )


def _what_if(filters: Filters, query: QueryDict) -> charts.Chart:
    target = what_if_target(query.get("card", "")) or what_if_targets()[0]
    return charts.what_if(what_if(filters, target=target), target_label=target.label)


CHARTS: dict[str, ChartSpec] = {
    "cost": ChartSpec("Cost over time", _cost),
    "cost-by-key": ChartSpec(
        "Cost by API key",
        lambda f, q: charts.cost_ranking(cost_by_key(f), name="API key"),
        over_time=False,
        by_attribution=True,
    ),
    "cost-by-end-user": ChartSpec(
        "Cost by end user",
        lambda f, q: charts.cost_ranking(cost_by_end_user(f), name="End user"),
        over_time=False,
        by_attribution=True,
    ),
    "cost-by-preset-version": ChartSpec(
        "Cost and cached share by prompt version",
        lambda f, q: charts.preset_versions(cost_by_preset_version(f)),
        over_time=False,
        by_preset=True,
    ),
    "scores-by-preset-version": ChartSpec(
        "Scores by prompt version",
        lambda f, q: charts.scores_by_version(scores_by_preset_version(f)),
        over_time=False,
        by_scores=True,
    ),
    "tokens": ChartSpec(
        "Input tokens: fresh and cached",
        lambda f, q: charts.tokens_fresh_vs_cached(tokens_over_time(f), buckets=buckets(f)),
    ),
    "cache-ratio": ChartSpec(
        "Cache hit ratio: affinity on and off",
        lambda f, q: charts.cache_hit_ratio(cache_ratio_by_affinity(f), buckets=buckets(f)),
    ),
    "savings": ChartSpec(
        "Savings from caching",
        lambda f, q: charts.savings(savings_over_time(f), buckets=buckets(f)),
    ),
    "cache-breaks": ChartSpec(
        "Cache breaks by cause",
        lambda f, q: charts.cache_breaks(cache_breaks_over_time(f), buckets=buckets(f)),
    ),
    "ttft": ChartSpec(
        "Time to first token: cache hit and miss",
        lambda f, q: charts.ttft_by_cache(ttft_percentiles_by_cache(f), buckets=buckets(f)),
    ),
    "latency": ChartSpec(
        "Latency distribution",
        lambda f, q: charts.latency_distribution(latency_distribution(f)),
        over_time=False,
    ),
    "status": ChartSpec(
        "Requests by status",
        lambda f, q: charts.requests_by_status(requests_by_status(f), buckets=buckets(f)),
    ),
    "top-conversations": ChartSpec(
        "Top conversations by cost",
        lambda f, q: charts.top_conversations(top_conversations(f)),
        over_time=False,
    ),
    "prompt-growth": ChartSpec(
        "Prompt tokens per turn: top sessions",
        lambda f, q: charts.prompt_growth(prompt_growth(f)),
        over_time=False,
    ),
    "what-if": ChartSpec("What-if re-pricing", _what_if, over_time=False),
    "redactions": ChartSpec(
        "Redacted values by type",
        lambda f, q: charts.redactions(redactions_over_time(f), buckets=buckets(f)),
        by_records=True,
    ),
}
# The dashboard's own controls beside the filters: a fragment request made by one of them
# (htmx names it in HX-Trigger-Name) pushes the dashboard's address with the choice.
CHOICES = ("group", "card")


def _query(query: QueryDict, *, without: tuple[str, ...] = ()) -> str:
    """The query string less `without` and less empty values (the address stays readable)."""
    kept = QueryDict(mutable=True)
    for name, values in query.lists():
        if name not in without and any(values):
            kept.setlist(name, [value for value in values if value])
    return kept.urlencode()


def _filters(request: HtmxHttpRequest) -> tuple[Filters | None, FilterForm]:
    """The filters and the bound form; a foreign team raises Http404, bad input FilterError."""
    form = FilterForm(request.GET)
    return filters_from_query(user=request.user, query=request.GET), form


def _fragment_filters(request: HtmxHttpRequest) -> Filters | HttpResponse:
    """The filters of a fragment or an export, or a plain-text 400 naming what is wrong."""
    try:
        filters = filters_from_query(user=request.user, query=request.GET)
    except FilterError as error:
        return refusal(request, f"Invalid filters: {'; '.join(str(m) for m in error.form.errors.values())}")
    if filters is None:
        raise Http404("You are in no team.")
    return filters


def _page_context(request: HtmxHttpRequest, filters: Filters | None, form: FilterForm) -> dict[str, Any]:
    context: dict[str, Any] = {
        "form": form,
        "filters": filters,
        "team_options": team_list_for_user(user=request.user),
        "query": _query(request.GET),
        "card": request.GET.get("card", ""),
        "now": timezone.now(),
    }
    if filters is not None:
        context.update(filter_choices(filters))
    return context


def _template(request: HtmxHttpRequest, page: str) -> str:
    """The page, or only its content for the filter form's htmx request (which swaps it in);
    a history restore gets the whole page, which htmx puts in the body."""
    if request.htmx and not request.htmx.history_restore_request:
        return f"{page}#analytics"
    return page


def _invalid(request: HtmxHttpRequest, page: str, error: FilterError) -> HttpResponse:
    context = {
        "form": error.form,
        "filters": None,
        "team_options": team_list_for_user(user=request.user),
        "card": request.GET.get("card", ""),
        "errors": True,
    }
    # To the filter form's own htmx request the errors are the answer, so htmx swaps them in.
    return render(request, _template(request, page), context, status=200 if request.htmx else 400)


@never_cache
@login_required
@require_GET
def dashboard_view(request: HtmxHttpRequest) -> HttpResponse:
    try:
        filters, form = _filters(request)
    except FilterError as error:
        return _invalid(request, "analytics/dashboard.html", error)
    context = _page_context(request, filters, form)
    context["charts"] = [{"name": name, "title": spec.title} for name, spec in CHARTS.items()]
    if filters is not None and not filters.by_attribution:  # else no chart over time is drawn
        drawn = chart_period(filters)
        context["chart_period"] = drawn if drawn != filters.period else None
    return render(request, _template(request, "analytics/dashboard.html"), context)


@never_cache
@login_required
@require_GET
def headline_view(request: HtmxHttpRequest) -> HttpResponse:
    filters = _fragment_filters(request)
    if isinstance(filters, HttpResponse):
        return filters
    if not filters.by_attribution:
        return render(request, "analytics/_headline.html", {"tiles": headline_tiles(headline(filters))})
    unserved = attribution_unserved(filters)
    context = {
        "tiles": [] if unserved else attribution_tiles(attribution_totals(filters)),
        "note": unserved or HEADLINE_BY_ATTRIBUTION,
    }
    return render(request, "analytics/_headline.html", context)


@never_cache
@login_required
@require_GET
def routing_outcomes_view(request: HtmxHttpRequest) -> HttpResponse:
    """What the routing policies did in the filtered period (from the records)."""
    filters = _fragment_filters(request)
    if isinstance(filters, HttpResponse):
        return filters
    context = {"outcomes": routing_outcomes(filters), "tagged_from": TAGGED_FROM}
    return render(request, "analytics/_routing.html", context)


@never_cache
@login_required
@require_GET
def conformance_view(request: HtmxHttpRequest) -> HttpResponse:
    """The schema conformance table of the filtered period (from the records, every filter applies)."""
    filters = _fragment_filters(request)
    if isinstance(filters, HttpResponse):
        return filters
    conformance = schema_conformance(filters)
    context = {
        "lines": conformance_lines(conformance),
        "paths_sampled": conformance.paths_sampled,
        "paths_from": ERROR_PATHS_FROM,
    }
    return render(request, "analytics/_conformance.html", context)


@never_cache
@login_required
@require_GET
def hit_ratio_view(request: HtmxHttpRequest) -> HttpResponse:
    """Cache hit ratio per session and per affinity key, the most lost first (from the records)."""
    filters = _fragment_filters(request)
    if isinstance(filters, HttpResponse):
        return filters
    ratios = hit_ratios(filters)
    labels = session_labels(team_id=filters.team.pk, keys=[row.key for row in ratios.sessions])
    chart = charts.lost_savings(
        [
            {"label": labels[row.key].text, "lost": row.lost, "requests": row.requests}
            for row in ratios.sessions
        ]
    )
    context = {
        "sessions": [(row, labels[row.key]) for row in ratios.sessions],
        "affinity_keys": ratios.affinity_keys,
        "ratios": ratios,
        "chart": chart,
        "figure_json": json.dumps(chart.figure, cls=FigureEncoder),
        "sessions_read": SESSIONS_READ,
        "rows_read": ROWS_READ,
    }
    return render(request, "analytics/_hit_ratio.html", context)


@never_cache
@login_required
@require_GET
def runway_view(request: HtmxHttpRequest) -> HttpResponse:
    """The period's sessions closest to their model's context window."""
    filters = _fragment_filters(request)
    if isinstance(filters, HttpResponse):
        return filters
    near = sessions_near_limit(filters)
    labels = session_labels(team_id=filters.team.pk, keys=[each.session for each in near])
    context = {"rows": [(each, labels[each.session]) for each in near], "candidates": CANDIDATES}
    return render(request, "analytics/_runway.html", context)


@never_cache
@login_required
@require_GET
def chart_view(request: HtmxHttpRequest, name: str) -> HttpResponse:
    spec = CHARTS.get(name)
    if spec is None:
        raise Http404("No such chart.")
    filters = _fragment_filters(request)
    if isinstance(filters, HttpResponse):
        return filters
    unavailable = spec.unavailable(filters)
    chart = None
    if not unavailable:
        drawn = replace(filters, period=chart_period(filters)) if spec.over_time else filters
        chart = spec.build(drawn, request.GET)
    url = reverse("analytics:chart", args=[name])
    context = {
        "name": name,
        "title": spec.title,
        "chart": chart,
        "unavailable": unavailable,
        # In a data attribute, escaped by the template (htmx drops <script> elements it swaps in).
        "figure_json": json.dumps(chart.figure if chart else {}, cls=FigureEncoder),
        "table_body": table_body(chart.table) if chart else "",
        "filters": filters,
        # A control's request adds its own name and value to these (a button's too).
        "groups": GROUPS,
        "group_url": f"{url}?{_query(request.GET, without=('group',))}",
        "what_if_url": f"{url}?{_query(request.GET, without=('card',))}",
        "what_if_targets": what_if_targets() if name == "what-if" else [],
        "what_if_selected": request.GET.get("card", ""),
    }
    response = render(request, "analytics/chart.html", context)
    if request.htmx.trigger_name in CHOICES:
        push_url(response, _address_with(request, request.htmx.trigger_name))
    return response


def _address_with(request: HtmxHttpRequest, choice: str) -> str:
    """The dashboard's address with the choice just made: the page's current address (htmx
    sends it), whose other controls may have changed since this fragment was drawn."""
    dashboard = reverse("analytics:dashboard")
    current = urlsplit(request.htmx.current_url or "")
    query = QueryDict(current.query, mutable=True) if current.path == dashboard else request.GET.copy()
    query[choice] = request.GET.get(choice, "")
    return f"{dashboard}?{_query(query)}"


@never_cache
@login_required
@require_GET
def log_view(request: HtmxHttpRequest) -> HttpResponse:
    try:
        filters, form = _filters(request)
    except FilterError as error:
        return _invalid(request, "analytics/log.html", error)
    context = _page_context(request, filters, form)
    if filters is not None:
        try:
            page = log_page(filters, cursor=request.GET.get("after", ""))
        except BadCursor:
            return refusal(request, "That page link is not valid: start again from the first page.")
        next_query = request.GET.copy()
        next_query["after"] = page.next_cursor
        sources = record_source_links(team_id=filters.team.pk, records=page.records)
        presets = preset_version_labels(
            team_id=filters.team.pk,
            ids=[record.preset_version_id for record in page.records if record.preset_version_id],
        )
        scores = score_summaries(team_id=filters.team.pk, record_ids=[record.pk for record in page.records])
        context.update(
            {
                "page": page,
                "rows": [
                    (
                        record,
                        source,
                        _attribution_queries(request.GET, record),
                        presets.get(record.preset_version_id or 0),
                        scores.get(record.pk),
                    )
                    for record, source in zip(page.records, sources, strict=True)
                ],
                "next_query": _query(next_query) if page.next_cursor else "",
                "first_query": _query(request.GET, without=("after",)),
                "is_first_page": not request.GET.get("after"),
                "focus_unserved": focus_unserved(filters),
            }
        )
    return render(request, _template(request, "analytics/log.html"), context)


def _attribution_queries(query: QueryDict, record: UsageRecord) -> dict[str, str]:
    """The log's query narrowed to a gateway record's key and to its end user (from page one)."""
    queries = {}
    for name, value in (("key", record.api_key_id), ("end_user", record.end_user)):
        if value:
            narrowed = query.copy()
            narrowed[name] = str(value)
            queries[name] = _query(narrowed, without=("after",))
    return queries


@never_cache
@login_required
@require_GET
def log_totals_view(request: HtmxHttpRequest) -> HttpResponse:
    filters = _fragment_filters(request)
    if isinstance(filters, HttpResponse):
        return filters
    return render(request, "analytics/_log_totals.html", {"totals": log_totals(filters)})


@never_cache
@login_required
@require_GET
def record_detail_view(request: HtmxHttpRequest, request_id: uuid.UUID) -> HttpResponse:
    record = usage_record_get(user=request.user, request_id=str(request_id))
    if record is None:
        raise Http404("No such usage record.")
    found = record_break(record)
    context = {
        "record": record,
        "preset": preset_version_ref(team_id=record.team_id, version_id=record.preset_version_id),
        "cache_break": break_shown(found) if found is not None else None,
        "formula": cost_formula(record),
        "attribution": record_attribution(record),
        "redactions": record_redactions(record),
        "routing": record_routing(record),
        "source": record_source_links(team_id=record.team_id, records=[record])[0],
        "raw_usage": json.dumps(record.raw_usage, indent=2, ensure_ascii=False) if record.raw_usage else "",
        "request_body": json.dumps(record.request_body, indent=2, ensure_ascii=False)
        if record.request_body
        else "",
        **scores_context(record=record, user_id=request.user.pk),
    }
    return render(request, "analytics/detail.html", context)


EXPORT_TYPES = {
    "csv": ("text/csv; charset=utf-8", "csv"),
    "jsonl": ("application/x-ndjson; charset=utf-8", "jsonl"),
    "xlsx": ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "xlsx"),
}
# CSV flavour -> (content type, file name suffix); see exports.CSV_FLAVOURS
CSV_FLAVOURS = {
    exports.SPREADSHEET: ("text/csv; charset=utf-8", "spreadsheet"),
    exports.DATA: ("text/csv; charset=utf-8; header=present", "data"),
}


@never_cache
@login_required
@require_GET
def focus_export_view(request: HtmxHttpRequest) -> HttpResponse:
    """The period's FOCUS file (`focus`), for the filters the rollups hold; a 400 names the others."""
    filters = _fragment_filters(request)
    if isinstance(filters, HttpResponse):
        return filters
    unserved = focus_unserved(filters)
    if unserved:
        return refusal(request, unserved)
    period = filters.period
    name = f"focus-{filters.team.slug}-{period.start:%Y%m%d-%H%M}-{period.end:%Y%m%d-%H%M}"
    response = HttpResponse(focus.focus_csv(filters), content_type="text/csv; charset=utf-8; header=present")
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response


@never_cache
@login_required
@require_GET
def export_view(request: HtmxHttpRequest, fmt: str) -> HttpResponse | StreamingHttpResponse:
    if fmt not in EXPORT_TYPES:
        raise Http404("No such export format.")
    filters = _fragment_filters(request)
    if isinstance(filters, HttpResponse):
        return filters
    content_type, extension = EXPORT_TYPES[fmt]
    name = f"usage-{filters.team.slug}-{timezone.now().strftime('%Y%m%d-%H%M')}"
    if fmt == "csv":
        flavour = request.GET.get("flavour") or exports.SPREADSHEET
        if flavour not in CSV_FLAVOURS:
            return refusal(request, f"Unknown CSV flavour {flavour!r}: use {' or '.join(CSV_FLAVOURS)}.")
        content_type, suffix = CSV_FLAVOURS[flavour]
        name = f"{name}-{suffix}"
        stream = exports.csv_stream(filters, flavour=flavour)
    elif fmt == "jsonl":
        stream = exports.jsonl_stream(filters)
    else:
        stream = exports.xlsx_stream(filters)
    response = StreamingHttpResponse(stream, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}.{extension}"'
    return response
