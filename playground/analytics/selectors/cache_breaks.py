"""The dashboard's cache breaks: how many by cause per bucket, and what they cost."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from playground.analytics.filters import Filters
from playground.analytics.selectors.request_log import log_records
from playground.analytics.selectors.rollups import bucket_floor
from playground.usage.insights.cache_break_selectors import team_breaks
from playground.usage.insights.cache_breaks import CacheBreak

ID_CHUNK = 500  # record ids per `IN (...)`: well inside every database's parameter limit


def cache_breaks_over_time(filters: Filters) -> list[dict[str, Any]]:
    """[{bucket, cause, breaks, lost_tokens, lost}] of the period's breaks whose record the
    filters keep (sessions are followed whole: a filter picks the breaks, not the requests
    they are compared with)."""
    found = list(team_breaks(team_id=filters.team.pk, since=filters.period.start, until=filters.period.end))
    kept = _kept(filters, found)
    rows: dict[tuple[Any, str], dict[str, Any]] = defaultdict(
        lambda: {"breaks": 0, "lost_tokens": 0, "lost": Decimal(0)}
    )
    for each in found:
        if each.record_id not in kept or each.created_at is None:
            continue
        row = rows[(bucket_floor(each.created_at, hourly=filters.period.hourly), str(each.cause))]
        row["breaks"] += 1
        row["lost_tokens"] += each.lost_tokens
        row["lost"] += each.lost_usd
    return [{"bucket": bucket, "cause": cause, **row} for (bucket, cause), row in sorted(rows.items())]


def _kept(filters: Filters, found: list[CacheBreak]) -> set[int]:
    ids = [each.record_id for each in found]
    kept: set[int] = set()
    for start in range(0, len(ids), ID_CHUNK):
        chunk = ids[start : start + ID_CHUNK]
        kept.update(log_records(filters).filter(pk__in=chunk).values_list("pk", flat=True))
    return kept
