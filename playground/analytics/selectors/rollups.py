"""Dashboard reads: rollup rows in, plain rows out (no raw usage row is scanned here, except
by `log_totals` for the two log filters the rollups do not hold).

Every function takes `Filters`, whose team the caller has already checked is the acting
user's (see `filters.filters_from_query`). Periods of up to seven days read the hourly
rollup, longer ones the daily rollup; a bucket is counted when it starts inside the period.
Money leaves here as Decimal USD; re-pricing goes through `usage.pricing.cost_for`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Count, F, Max, Min, Q, QuerySet, Sum
from django.db.models.functions import Coalesce

from playground.analytics.filters import HOURLY_UP_TO, Filters, Period
from playground.analytics.histograms import percentile
from playground.analytics.selectors.request_log import log_records
from playground.catalog.models import PriceCard
from playground.providers.models import ProviderConnection
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.models import (
    COST_SCALE,
    LATENCY_COLUMNS,
    TTFT_COLUMNS,
    CacheState,
    UsageConversationDaily,
    UsageConversationTotal,
    UsageDaily,
    UsageHourly,
    UsagePeopleDaily,
    UsagePeopleHourly,
    UsageRecord,
    UsageStatus,
    UsageTeamDaily,
    UsageTeamHourly,
)
from playground.usage.pricing import cost_for
from playground.usage.rollups import as_e10
from playground.usage.sources import CONVERSATION, SourceKey, source_links

TOP_CONVERSATIONS = 10
GROWTH_SESSIONS = 5
GROWTH_TURNS = 200
MAX_STRADDLERS = 1000
NO_CACHE_DISCOUNT = "nocache"
HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)
ZOOM_MIN_BUCKETS = 12


def usd(e10: int | None) -> Decimal:
    return Decimal(e10 or 0) / COST_SCALE


def _floor(at: dt.datetime, *, hourly: bool) -> dt.datetime:
    at = at.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
    return at if hourly else at.replace(hour=0)


RollupModel = (
    type[UsageHourly]
    | type[UsageDaily]
    | type[UsageTeamHourly]
    | type[UsageTeamDaily]
    | type[UsagePeopleHourly]
    | type[UsagePeopleDaily]
)


def rollup_model(filters: Filters, *, by_people: bool = False) -> RollupModel:
    """The smallest rollup that holds what the filters and the grouping need, hourly or daily.

    People tables (users and connections; costs and tokens only) when grouping by user or
    connection with no other dimension filtered; team-level ones when neither users nor
    connections are involved; the full key otherwise.
    """
    hourly = filters.period.hourly
    other_dimension = filters.model_id or filters.path or filters.status or filters.affinity
    if by_people and not other_dimension:
        return UsagePeopleHourly if hourly else UsagePeopleDaily
    if by_people or filters.user_id or filters.connection_id:
        return UsageHourly if hourly else UsageDaily
    return UsageTeamHourly if hourly else UsageTeamDaily


def rollup_rows(filters: Filters, *, by_people: bool = False) -> QuerySet[Any]:
    """The rollup rows of the filters' team, period and dimensions (hourly or daily).

    `by_people`: the caller groups by user or connection and reads only costs and tokens.
    """
    period = filters.period
    model = rollup_model(filters, by_people=by_people)
    rows: QuerySet[Any] = model.objects.filter(
        team=filters.team,
        bucket__gte=_floor(period.start, hourly=period.hourly),
        bucket__lt=period.end,
    )
    if filters.model_id:
        rows = rows.filter(model_id=filters.model_id)
    if filters.user_id:
        rows = rows.filter(user_id=filters.user_id)
    if filters.connection_id:
        rows = rows.filter(connection_id=filters.connection_id)
    if filters.path:
        rows = rows.filter(path=filters.path)
    if filters.status:
        rows = rows.filter(status=filters.status)
    if filters.affinity:
        rows = rows.filter(affinity=filters.affinity == "on")
    return rows.order_by()


def filter_choices(filters: Filters) -> dict[str, list[Any]]:
    """What the filter pickers offer: the team's models (those it used), members and connections."""
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


def buckets(filters: Filters) -> list[dt.datetime]:
    """Every bucket start of the period, so a chart shows quiet hours as zero, not as gaps."""
    step = dt.timedelta(hours=1) if filters.period.hourly else dt.timedelta(days=1)
    at = _floor(filters.period.start, hourly=filters.period.hourly)
    out = []
    while at < filters.period.end:
        out.append(at)
        at += step
    return out


# --- the span the time charts draw -----------------------------------------------------------


def _active_buckets(filters: Filters) -> tuple[dt.datetime, dt.datetime] | None:
    """The first and last bucket with a request under the filters (the period's grain)."""
    span = rollup_rows(filters).aggregate(first=Min("bucket"), last=Max("bucket"))
    return None if span["first"] is None else (span["first"], span["last"])


def chart_period(filters: Filters) -> Period:
    """The part of the period the time charts draw, so that a short burst is readable.

    From the first to the last bucket with a request, widened to at least
    `ZOOM_MIN_BUCKETS` buckets inside the period, and hourly when the requests span seven days
    or less (a 90-day period whose requests fall in two days is drawn as 48 hours, not two
    bars). When that span is half the period or more, the whole period is drawn as chosen.
    Every request of the period lies inside the span, so no chart's total changes.
    """
    period = filters.period
    active = _active_buckets(filters)
    if active is None:
        return period
    first, last = active
    hourly = period.hourly
    if not hourly and last - first < HOURLY_UP_TO:
        days = Period(start=first, end=last + DAY, preset=period.preset, hourly=True)
        first, last = _active_buckets(replace(filters, period=days)) or active
        hourly = True
    step = HOUR if hourly else DAY
    lowest = _floor(period.start, hourly=hourly)
    highest = _floor(period.end - dt.timedelta(microseconds=1), hourly=hourly)
    missing = ZOOM_MIN_BUCKETS - ((last - first) // step + 1)
    if missing > 0:  # widen evenly, then move what falls outside the period to the other side
        first, last = first - step * (missing // 2), last + step * (missing - missing // 2)
        if last > highest:
            first, last = first - (last - highest), highest
        if first < lowest:
            first, last = lowest, min(highest, last + (lowest - first))
    window = Period(start=first, end=last + step, preset=period.preset, hourly=hourly)
    if (window.end - window.start) * 2 >= period.end - period.start:
        return period
    return window


# --- totals: the dashboard's headline figures and the log's totals row ----------------------------

ERRORS = Q(status__in=[UsageStatus.UPSTREAM_ERROR, UsageStatus.TIMEOUT, UsageStatus.REJECTED])
CACHE_STATE_OF_SHARE = {"none": CacheState.MISS, "unknown": CacheState.UNKNOWN}


@dataclass(frozen=True)
class Totals:
    requests: int
    prompt_tokens: int  # cached ones included
    cached_tokens: int
    completion_tokens: int
    cost: Decimal


@dataclass(frozen=True)
class Headline:
    totals: Totals
    unpriced: int  # requests no price card priced (their cost is 0)
    cached_share: float | None  # cached / prompt tokens of the requests that reported caching
    savings: Decimal  # as the savings chart: cached tokens at the input price minus their cost
    errors: int  # upstream errors, timeouts and refusals (a client that went away is none)
    ttft_p50: float | None  # ms, from the histograms

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.totals.requests if self.totals.requests else None


def _totals(sums: dict[str, Any]) -> Totals:
    return Totals(
        requests=sums["count"] or 0,
        prompt_tokens=sums["prompt"] or 0,
        cached_tokens=sums["cached"] or 0,
        completion_tokens=sums["completion"] or 0,
        cost=usd(sums["cost"]),
    )


def _rollup_total_sums() -> dict[str, Any]:
    return {
        "count": Sum("requests"),  # not "requests": a later Sum("requests") would read this
        "prompt": Sum("prompt_tokens"),
        "cached": Sum("cached_tokens"),
        "completion": Sum("completion_tokens"),
        "cost": Sum("total_cost_e10"),
    }


def log_totals(filters: Filters) -> Totals:
    """The request log's totals row: every request the filters select, on every page.

    From the rollups' whole buckets, which hold exactly the period's records (see `filters`),
    unless the log filters by conversation or by a cached share between none and all, which
    the rollups do not hold: then from the records through the log's own filter (an index
    on the conversation; a scan of the period otherwise).
    """
    if filters.conversation_id or filters.cached_share in ("some", "most"):
        sums = log_records(filters).aggregate(
            count=Count("id"),
            prompt=Sum("prompt_tokens"),
            cached=Sum("cached_tokens"),
            completion=Sum("completion_tokens"),
            cost=Coalesce(Sum(as_e10("total_cost")), 0),
        )
        return _totals(sums)
    rows = rollup_rows(filters)
    if filters.cached_share:
        rows = rows.filter(cache_state=CACHE_STATE_OF_SHARE[filters.cached_share])
    return _totals(rows.aggregate(**_rollup_total_sums()))


def headline(filters: Filters) -> Headline:
    """The period's figures above the charts, from one rollup query grouped by price card."""
    rows = list(
        rollup_rows(filters)
        .values("price_card_id")
        .annotate(
            **_rollup_total_sums(),
            cached_cost=Sum("cached_input_cost_e10"),
            known=Sum("prompt_tokens", filter=KNOWN_CACHE),
            errors=Sum("requests", filter=ERRORS),
            **_sums(TTFT_COLUMNS),
        )
        .order_by()
    )
    total = {key: sum(row[key] or 0 for row in rows) for key in _rollup_total_sums()}
    cards = PriceCard.objects.in_bulk({row["price_card_id"] for row in rows if row["price_card_id"]})
    savings = sum(
        (
            _at_input_price(cards[row["price_card_id"]], row["cached"]) - usd(row["cached_cost"])
            for row in rows
            if row["price_card_id"] in cards
        ),
        Decimal(0),
    )
    known = sum(row["known"] or 0 for row in rows)
    errors = sum(row["errors"] or 0 for row in rows)
    ttft = [sum(row[column] or 0 for row in rows) for column in TTFT_COLUMNS]
    return Headline(
        totals=_totals(total),
        unpriced=sum(row["count"] or 0 for row in rows if not row["price_card_id"]),
        cached_share=total["cached"] / known if known else None,
        savings=savings,
        errors=errors,
        ttft_p50=percentile(ttft, 50),
    )


# --- cost ----------------------------------------------------------------------------------


def cost_by_group(filters: Filters) -> list[dict[str, Any]]:
    """[{bucket, key, label, cost}] with the group (model, user or connection) as key."""
    column = {"model": "model_id", "user": "user_id", "connection": "connection_id"}[filters.group]
    rows = list(
        rollup_rows(filters, by_people=filters.group != "model")
        .values("bucket", column)
        .annotate(cost=Sum("total_cost_e10"))
        .order_by("bucket", column)
    )
    labels = _labels(filters.group, {row[column] for row in rows})
    return [
        {"bucket": row["bucket"], "key": row[column], "label": labels[row[column]], "cost": usd(row["cost"])}
        for row in rows
    ]


def _labels(group: str, keys: set[Any]) -> dict[Any, str]:
    if group == "model":
        return {key: key for key in keys}
    if group == "user":
        names = dict(User.objects.filter(pk__in=keys).values_list("pk", "username"))
        return {key: names.get(key, "(no user)" if key == 0 else f"user {key}") for key in keys}
    names = dict(ProviderConnection.objects.filter(pk__in=keys).values_list("pk", "name"))
    return {key: names.get(key, "(deleted connection)" if key else "(none)") for key in keys}


# --- tokens and caching -----------------------------------------------------------------------

KNOWN_CACHE = ~Q(cache_state=CacheState.UNKNOWN)


def tokens_over_time(filters: Filters) -> list[dict[str, Any]]:
    """[{bucket, fresh, cached, share}]: share = cached / prompt tokens whose cache figure is known."""
    rows = (
        rollup_rows(filters)
        .values("bucket")
        .annotate(
            prompt=Sum("prompt_tokens"),
            cached=Sum("cached_tokens"),
            known=Sum("prompt_tokens", filter=KNOWN_CACHE),
        )
        .order_by("bucket")
    )
    return [
        {
            "bucket": row["bucket"],
            "fresh": row["prompt"] - row["cached"],
            "cached": row["cached"],
            "share": row["cached"] / row["known"] if row["known"] else None,
        }
        for row in rows
    ]


def cache_ratio_by_affinity(filters: Filters) -> list[dict[str, Any]]:
    """[{bucket, affinity, ratio, requests}]: cached / prompt tokens among records that reported caching.

    Records with no cache figure are left out of numerator and denominator (unknown is not zero).
    """
    rows = (
        rollup_rows(filters)
        .filter(KNOWN_CACHE)
        .values("bucket", "affinity")
        .annotate(prompt=Sum("prompt_tokens"), cached=Sum("cached_tokens"), requests=Sum("requests"))
        .order_by("bucket", "affinity")
    )
    return [
        {
            "bucket": row["bucket"],
            "affinity": row["affinity"],
            "ratio": row["cached"] / row["prompt"] if row["prompt"] else None,
            "requests": row["requests"],
        }
        for row in rows
    ]


def savings_over_time(filters: Filters) -> list[dict[str, Any]]:
    """[{bucket, would_cost, cost, savings}]: cached tokens at their card's input price minus their cost."""
    rows = list(
        rollup_rows(filters)
        .exclude(price_card_id=0)
        .values("bucket", "price_card_id")
        .annotate(cached=Sum("cached_tokens"), cost=Sum("cached_input_cost_e10"))
        .order_by("bucket")
    )
    cards = PriceCard.objects.in_bulk({row["price_card_id"] for row in rows})
    out: dict[dt.datetime, dict[str, Any]] = {}
    for row in rows:
        card = cards.get(row["price_card_id"])
        if card is None:
            continue
        at_input_price = _at_input_price(card, row["cached"])
        entry = out.setdefault(
            row["bucket"], {"bucket": row["bucket"], "would_cost": Decimal(0), "cost": Decimal(0)}
        )
        entry["would_cost"] += at_input_price
        entry["cost"] += usd(row["cost"])
    for entry in out.values():
        entry["savings"] = entry["would_cost"] - entry["cost"]
    return sorted(out.values(), key=lambda entry: entry["bucket"])


def _at_input_price(card: PriceCard, cached_tokens: int) -> Decimal:
    """What cached tokens would have cost at the card's fresh input price."""
    return cost_for(usage=NormalizedUsage(prompt_tokens=cached_tokens, completion_tokens=0), card=card).input


# --- timings -----------------------------------------------------------------------------------


def _sums(columns: tuple[str, ...]) -> dict[str, Sum]:
    return {column: Sum(column) for column in columns}


def ttft_percentiles_by_cache(filters: Filters) -> list[dict[str, Any]]:
    """[{bucket, cache_state, p50, p95, requests}] for cache hits and misses (ms, from the histograms)."""
    rows = (
        rollup_rows(filters)
        .filter(cache_state__in=[CacheState.HIT, CacheState.MISS])
        .values("bucket", "cache_state")
        .annotate(**_sums(TTFT_COLUMNS))
        .order_by("bucket", "cache_state")
    )
    out = []
    for row in rows:
        counts = [row[column] or 0 for column in TTFT_COLUMNS]
        if sum(counts):
            out.append(
                {
                    "bucket": row["bucket"],
                    "cache_state": row["cache_state"],
                    "p50": percentile(counts, 50),
                    "p95": percentile(counts, 95),
                    "requests": sum(counts),
                }
            )
    return out


def latency_distribution(filters: Filters) -> dict[str, Any]:
    """{counts: per histogram bucket, p50, p95, p99} over the whole period (ms)."""
    totals = rollup_rows(filters).aggregate(**_sums(LATENCY_COLUMNS))
    counts = [totals[column] or 0 for column in LATENCY_COLUMNS]
    return {
        "counts": counts,
        "p50": percentile(counts, 50),
        "p95": percentile(counts, 95),
        "p99": percentile(counts, 99),
    }


def requests_by_status(filters: Filters) -> list[dict[str, Any]]:
    rows = (
        rollup_rows(filters).values("bucket", "status").annotate(requests=Sum("requests")).order_by("bucket")
    )
    return list(rows)


# --- conversations ----------------------------------------------------------------------------


def top_conversations(filters: Filters, *, limit: int = TOP_CONVERSATIONS) -> list[dict[str, Any]]:
    """[{conversation_id, title, cost, requests, prompt_tokens, cached_tokens}] by cost over the period.

    Reads the conversation rollups: they have no model, user or status dimension, so only the
    team and period filters apply here. A day counts when it starts inside the period.
    """
    days = UsageConversationDaily.objects.filter(
        team=filters.team,
        bucket__gte=_floor(filters.period.start, hourly=False),
        bucket__lt=filters.period.end,
    )
    rows = _top_by_totals(filters, days, limit=limit)
    if rows is None:  # fewer than `limit` conversations lie wholly inside: rank the period's days
        rows = list(_conversation_sums(days).order_by("-cost", "conversation_id")[:limit])
    titles = _conversation_titles(filters.team.pk, [row["conversation_id"] for row in rows])
    return [
        {
            **row,
            "cost": usd(row["cost"]),
            "title": titles.get(row["conversation_id"], ""),
        }
        for row in rows
    ]


def _conversation_sums(rows: QuerySet[Any]) -> QuerySet[Any]:
    sums: QuerySet[Any] = (
        rows.order_by()
        .values("conversation_id")
        .annotate(
            cost=Sum("total_cost_e10"),
            requests=Sum("requests"),
            prompt_tokens=Sum("prompt_tokens"),
            cached_tokens=Sum("cached_tokens"),
        )
    )
    return sums


def _top_by_totals(filters: Filters, days: QuerySet[Any], *, limit: int) -> list[dict[str, Any]] | None:
    """The exact top `limit` without summing every conversation-day of the period, or None.

    A conversation whose days all fall inside the period costs its all-time total there; one
    that straddles the period costs at most its total. So take the top `limit` wholly inside
    (an index walk down the totals), and sum the period's days only for straddlers whose total
    reaches the last of those: no other conversation can rank.
    """
    first_day, end = _floor(filters.period.start, hourly=False), filters.period.end
    totals = UsageConversationTotal.objects.filter(team=filters.team)
    inside = Q(first_bucket__gte=first_day, last_bucket__lt=end)
    ranked: list[dict[str, Any]] = [
        dict(row)
        for row in totals.filter(inside)
        .order_by("-total_cost_e10", "conversation_id")
        .annotate(cost=F("total_cost_e10"))
        .values("conversation_id", "cost", "requests", "prompt_tokens", "cached_tokens")[:limit]
    ]
    if len(ranked) < limit:
        return None
    straddling = list(
        totals.filter(
            total_cost_e10__gte=ranked[-1]["cost"], first_bucket__lt=end, last_bucket__gte=first_day
        )
        .exclude(inside)
        .values_list("conversation_id", flat=True)[: MAX_STRADDLERS + 1]
    )
    if len(straddling) > MAX_STRADDLERS:  # the last total is too low to rule many out
        return None
    ranked += _conversation_sums(days.filter(conversation_id__in=straddling))
    ranked.sort(key=lambda row: (-row["cost"], row["conversation_id"]))
    return ranked[:limit]


def _conversation_titles(team_id: int, ids: list[int]) -> dict[int, str]:
    """Each conversation's title (or "Conversation #12"), "(deleted)" once it is gone: through
    the usage sources that chat registers, since analytics does not import chat."""
    links = source_links(team_id=team_id, keys=[SourceKey(CONVERSATION, pk) for pk in ids])
    return {key.id: link.name for key, link in links.items()}


def prompt_growth(filters: Filters, *, sessions: int = GROWTH_SESSIONS) -> list[dict[str, Any]]:
    """[{conversation_id, title, turns: [prompt tokens per request, in order]}] for the top sessions.

    The only raw-row read of the dashboard: at most `GROWTH_TURNS` rows of each of a handful
    of conversations, through the records' conversation index.
    """
    top = top_conversations(filters, limit=sessions)
    out = []
    for row in top:
        turns = list(
            UsageRecord.objects.filter(
                team=filters.team,
                conversation_id=row["conversation_id"],
                created_at__gte=filters.period.start,
                created_at__lt=filters.period.end,
            )
            .order_by("created_at", "id")
            .values_list("prompt_tokens", flat=True)[:GROWTH_TURNS]
        )
        out.append({"conversation_id": row["conversation_id"], "title": row["title"], "turns": turns})
    return out


# --- what-if re-pricing --------------------------------------------------------------------------


@dataclass(frozen=True)
class WhatIfTarget:
    key: str
    label: str
    card: PriceCard | None  # None: each group's own card without its cache discount


def what_if_targets() -> list[WhatIfTarget]:
    cards = PriceCard.objects.select_related("model").order_by("model__display_name", "-effective_from")
    return [
        WhatIfTarget(NO_CACHE_DISCOUNT, "The same cards without their cache discount", None),
        *(
            WhatIfTarget(str(card.pk), f"{card.model.display_name} from {card.effective_from}", card)
            for card in cards
        ),
    ]


def what_if_target(key: str) -> WhatIfTarget | None:
    return next((target for target in what_if_targets() if target.key == key), None)


def what_if(filters: Filters, *, target: WhatIfTarget) -> list[dict[str, Any]]:
    """[{model_id, prompt_tokens, cached_tokens, completion_tokens, actual, repriced, difference}].

    The period's tokens per model (and card) priced again by `cost_for` under the target card:
    the one cost function, applied to sums (pricing is linear in tokens, so this equals
    re-pricing each record, to the records' 1e-10 rounding).
    """
    rows = list(
        rollup_rows(filters)
        .values("model_id", "price_card_id")
        .annotate(
            prompt=Sum("prompt_tokens"),
            cached=Sum("cached_tokens"),
            completion=Sum("completion_tokens"),
            cost=Sum("total_cost_e10"),
        )
        .order_by("model_id")
    )
    own_cards = PriceCard.objects.in_bulk({row["price_card_id"] for row in rows if row["price_card_id"]})
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        card = (
            target.card
            if target.card is not None
            else _without_cache_discount(own_cards.get(row["price_card_id"]))
        )
        usage = NormalizedUsage(
            prompt_tokens=row["prompt"], completion_tokens=row["completion"], cached_tokens=row["cached"]
        )
        repriced = cost_for(usage=usage, card=card).total if card is not None else Decimal(0)
        entry = out.setdefault(
            row["model_id"],
            {
                "model_id": row["model_id"],
                "prompt_tokens": 0,
                "cached_tokens": 0,
                "completion_tokens": 0,
                "actual": Decimal(0),
                "repriced": Decimal(0),
            },
        )
        entry["prompt_tokens"] += row["prompt"]
        entry["cached_tokens"] += row["cached"]
        entry["completion_tokens"] += row["completion"]
        entry["actual"] += usd(row["cost"])
        entry["repriced"] += repriced
    for entry in out.values():
        entry["difference"] = entry["repriced"] - entry["actual"]
    return list(out.values())


def _without_cache_discount(card: PriceCard | None) -> PriceCard | None:
    if card is None:
        return None
    return PriceCard(
        model=card.model,
        effective_from=card.effective_from,
        input_per_m=card.input_per_m,
        cached_input_per_m=None,
        output_per_m=card.output_per_m,
        label=f"{card.label} without cache discount",
    )
