"""Totals: the dashboard's headline figures, and the request log's totals row (from the raw records
only for the log filters no rollup holds)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce

from playground.analytics.filters import Filters
from playground.analytics.histograms import percentile
from playground.analytics.selectors.request_log import log_records
from playground.analytics.selectors.rollups import (
    KNOWN_CACHE,
    at_input_price,
    attribution_rows,
    column_sums,
    rollup_rows,
    usd,
)
from playground.catalog.models import PriceCard
from playground.usage.models import TTFT_COLUMNS, CacheState, UsageStatus
from playground.usage.rollups import as_e10

ERRORS = Q(status__in=[UsageStatus.UPSTREAM_ERROR, UsageStatus.TIMEOUT, UsageStatus.REJECTED])
# Requests that were sent: a rejected one (a budget, a rate, an unpriced model refused) cost
# nothing, so it is not one the spend leaves out when no card priced it.
SENT = ~Q(status=UsageStatus.REJECTED)
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
    unpriced: int  # requests sent that no price card priced (their cost is 0); rejected ones are not
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

    From the rollups' whole buckets, which hold exactly the period's records (see `filters`):
    the rollups by key and end user when one is chosen, the others otherwise. When the log
    filters by something the rollups read do not hold (`_from_records`), from the records
    through the log's own filter instead (an index on the conversation, key, end user or
    session; a scan of the period otherwise).
    """
    if _from_records(filters):
        sums = log_records(filters).aggregate(
            count=Count("id"),
            prompt=Sum("prompt_tokens"),
            cached=Sum("cached_tokens"),
            completion=Sum("completion_tokens"),
            cost=Coalesce(Sum(as_e10("total_cost")), 0),
        )
        return _totals(sums)
    if filters.by_attribution:
        return attribution_totals(filters)
    rows = rollup_rows(filters)
    if filters.cached_share:
        rows = rows.filter(cache_state=CACHE_STATE_OF_SHARE[filters.cached_share])
    return _totals(rows.aggregate(**_rollup_total_sums()))


def _from_records(filters: Filters) -> bool:
    """Whether no rollup holds what the log's filters choose: a conversation, a preset version, a
    tag, a session, a routing rule or outcome, a score, or a cached share between none and all; with a key
    or an end user, also any dimension the rollups by key lack (model, user, connection, status,
    affinity, a cached share)."""
    if filters.conversation_id or filters.preset_version_id or filters.tag or filters.session:
        return True
    if filters.route_rule or filters.route_outcome or filters.score:
        return True
    if filters.cached_share in ("some", "most"):
        return True
    return filters.by_attribution and bool(filters.cached_share or filters.beyond_attribution())


def attribution_totals(filters: Filters) -> Totals:
    """Requests, tokens and cost of the filters' key or end user, from the rollups by key."""
    return _totals(attribution_rows(filters).aggregate(**_rollup_total_sums()))


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
            sent=Sum("requests", filter=SENT),
            **column_sums(TTFT_COLUMNS),
        )
        .order_by()
    )
    total = {key: sum(row[key] or 0 for row in rows) for key in _rollup_total_sums()}
    cards = PriceCard.objects.in_bulk({row["price_card_id"] for row in rows if row["price_card_id"]})
    savings = sum(
        (
            at_input_price(cards[row["price_card_id"]], row["cached"]) - usd(row["cached_cost"])
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
        unpriced=sum(row["sent"] or 0 for row in rows if not row["price_card_id"]),
        cached_share=total["cached"] / known if known else None,
        savings=savings,
        errors=errors,
        ttft_p50=percentile(ttft, 50),
    )
