"""Cost and cached share per prompt version: the dashboard's ranking of preset versions, from the
rollups by preset version (`usage.models.UsagePresetHourly`/`Daily`), never the records.

Those tables hold the team, bucket, version, path and cache state of the requests that name a
version, so the period, the path and a cached share of none or unknown apply; a filter on
anything else (model, user, connection, status, affinity, key, end user) cannot, and the chart
says so (`preset_rows_unserved`).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet, Sum

from playground.analytics.filters import Filters
from playground.analytics.selectors.rollups import KNOWN_CACHE, bucket_floor, usd
from playground.presets.selectors import preset_version_labels
from playground.usage.models import CacheState, UsagePresetDaily, UsagePresetHourly

TOP_VERSIONS = 12


def preset_rows_unserved(filters: Filters) -> str:
    """Why the rollups by preset version cannot answer these filters ("" when they can)."""
    chosen = [*filters.beyond_attribution(), *(["API key"] if filters.api_key_id else [])]
    chosen += ["end user"] if filters.end_user else []
    if not chosen:
        return ""
    return (
        "Prompt versions are summed by period and path only: "
        f"clear the {' and '.join(chosen)} filter{'s' * (len(chosen) > 1)} to see this."
    )


def preset_rows(filters: Filters) -> QuerySet[Any]:
    period = filters.period
    model: type[Any] = UsagePresetHourly if period.hourly else UsagePresetDaily
    rows: QuerySet[Any] = model.objects.filter(
        team=filters.team, bucket__gte=bucket_floor(period.start, hourly=period.hourly), bucket__lt=period.end
    ).order_by()
    if filters.path:
        rows = rows.filter(path=filters.path)
    if filters.cached_share in ("none", "unknown"):
        rows = rows.filter(
            cache_state=CacheState.MISS if filters.cached_share == "none" else CacheState.UNKNOWN
        )
    return rows


def cost_by_preset_version(filters: Filters, *, top: int = TOP_VERSIONS) -> list[dict[str, Any]]:
    """[{key, label, requests, prompt_tokens, cached_tokens, completion_tokens, cost, cached_share,
    cost_per_request}], the costliest versions of the period first. `cached_share` is cached /
    prompt tokens of the requests whose provider reported caching (None when none did)."""
    rows = list(
        preset_rows(filters)
        .values("preset_version_id")
        .annotate(
            n_requests=Sum("requests"),
            n_prompt=Sum("prompt_tokens"),
            n_cached=Sum("cached_tokens"),
            n_completion=Sum("completion_tokens"),
            n_cost=Sum("total_cost_e10"),
            n_known=Sum("prompt_tokens", filter=KNOWN_CACHE),
        )
        .order_by("-n_cost", "preset_version_id")[:top]
    )
    labels = preset_version_labels(team_id=filters.team.pk, ids=[row["preset_version_id"] for row in rows])
    return [
        {
            "key": row["preset_version_id"],
            "label": labels.get(row["preset_version_id"], f"Preset version #{row['preset_version_id']}"),
            "detail": "",
            "requests": row["n_requests"],
            "prompt_tokens": row["n_prompt"],
            "cached_tokens": row["n_cached"],
            "completion_tokens": row["n_completion"],
            "cost": usd(row["n_cost"]),
            "cached_share": row["n_cached"] / row["n_known"] if row["n_known"] else None,
            "cost_per_request": usd(row["n_cost"]) / row["n_requests"] if row["n_requests"] else None,
        }
        for row in rows
    ]
