"""The dashboard's cache breaks: how many by cause per bucket, and what they cost.

Breaks are found when their record is written (`usage.insights.cache_break_store`): the team's
chart reads their hourly sums by cause (a few rows per hour, whatever the number of records),
a filtered one the kept breaks whose record the filters keep.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import Decimal
from typing import Any

from django.db.models import Sum
from django.db.models.functions import TruncDay

from playground.analytics.filters import Filters
from playground.analytics.selectors.request_log import log_records
from playground.analytics.selectors.rollups import bucket_floor, usd
from playground.usage.models import UsageCacheBreak, UsageCacheBreakHourly


def cache_breaks_over_time(filters: Filters) -> list[dict[str, Any]]:
    """[{bucket, cause, breaks, lost_tokens, lost}] of the period's breaks whose record the
    filters keep (sessions are followed whole: a filter picks the breaks, not the requests
    they are compared with)."""
    unfiltered = Filters(team=filters.team, period=filters.period, group=filters.group, sort=filters.sort)
    return _from_hours(filters) if filters == unfiltered else _from_breaks(filters)


def _from_hours(filters: Filters) -> list[dict[str, Any]]:
    """The team's hourly sums whose hour starts inside the period, as the other charts count."""
    period = filters.period
    hours = UsageCacheBreakHourly.objects.filter(
        team=filters.team, bucket__gte=bucket_floor(period.start, hourly=period.hourly), bucket__lt=period.end
    ).order_by()
    bucket = "bucket" if period.hourly else "day"
    if not period.hourly:
        hours = hours.annotate(day=TruncDay("bucket", tzinfo=dt.UTC))
    rows = hours.values(bucket, "cause").annotate(
        n=Sum("breaks"), tokens=Sum("lost_tokens"), e10=Sum("lost_e10")
    )
    return sorted(
        (
            {
                "bucket": row[bucket],
                "cause": row["cause"],
                "breaks": row["n"],
                "lost_tokens": row["tokens"],
                "lost": usd(row["e10"]),
            }
            for row in rows
        ),
        key=lambda row: (row["bucket"], row["cause"]),
    )


def _from_breaks(filters: Filters) -> list[dict[str, Any]]:
    kept = UsageCacheBreak.objects.filter(
        team=filters.team,
        created_at__gte=filters.period.start,
        created_at__lt=filters.period.end,
        record_id__in=log_records(filters).values("pk"),
    ).values_list("created_at", "cause", "cached_tokens", "expected_cached_tokens", "lost_usd")
    rows: dict[tuple[Any, str], dict[str, Any]] = defaultdict(
        lambda: {"breaks": 0, "lost_tokens": 0, "lost": Decimal(0)}
    )
    for created_at, cause, cached, expected, lost in kept.iterator(chunk_size=2000):
        row = rows[(bucket_floor(created_at, hourly=filters.period.hourly), cause)]
        row["breaks"] += 1
        row["lost_tokens"] += expected - cached
        row["lost"] += lost
    return [{"bucket": bucket, "cause": cause, **row} for (bucket, cause), row in sorted(rows.items())]
