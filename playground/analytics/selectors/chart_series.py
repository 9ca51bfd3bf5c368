"""The rows of the dashboard's charts of cost, tokens and caching, timings and statuses."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Sum

from playground.analytics.filters import Filters
from playground.analytics.histograms import percentile
from playground.analytics.selectors.rollups import KNOWN_CACHE, at_input_price, column_sums, rollup_rows, usd
from playground.catalog.models import PriceCard
from playground.providers.models import ProviderConnection
from playground.usage.models import LATENCY_COLUMNS, TTFT_COLUMNS, CacheState

# --- cost -----------------------------------------------------------------------------------------


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


# --- tokens and caching ---------------------------------------------------------------------------


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
        would_cost = at_input_price(card, row["cached"])
        entry = out.setdefault(
            row["bucket"], {"bucket": row["bucket"], "would_cost": Decimal(0), "cost": Decimal(0)}
        )
        entry["would_cost"] += would_cost
        entry["cost"] += usd(row["cost"])
    for entry in out.values():
        entry["savings"] = entry["would_cost"] - entry["cost"]
    return sorted(out.values(), key=lambda entry: entry["bucket"])


# --- timings --------------------------------------------------------------------------------------


def ttft_percentiles_by_cache(filters: Filters) -> list[dict[str, Any]]:
    """[{bucket, cache_state, p50, p95, requests}] for cache hits and misses (ms, from the histograms)."""
    rows = (
        rollup_rows(filters)
        .filter(cache_state__in=[CacheState.HIT, CacheState.MISS])
        .values("bucket", "cache_state")
        .annotate(**column_sums(TTFT_COLUMNS))
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
    totals = rollup_rows(filters).aggregate(**column_sums(LATENCY_COLUMNS))
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
