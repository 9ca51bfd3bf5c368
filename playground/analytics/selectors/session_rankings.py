"""The period's top sessions by prompt tokens or by their largest prompt, from the session
rollups (`usage.models.session_rollups`) instead of every answered record of the period.

What the hit-ratio and runway fragments rank first. Exact, as grouping the records was:
the period's whole hours are read from the hourly rows, its partial first and last hours from
the records (an hour of records at most each), so the sums are the records' of [start, end).
Sessions are walked down their all-time totals (an index), which bound what they can add up to
in any period, in batches whose exact period sums are read; the walk stops once the next total
is below the last of the best found so far: no session further down can rank.

Only for filters that choose nothing beyond the team and period (`plain`); the fragments rank
the filtered records themselves otherwise.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Literal

from django.db.models import Count, Max, Sum

from playground.analytics.filters import Filters
from playground.usage.insights.sessions import session_key_expression
from playground.usage.models import TeamRetention, UsageRecord, UsageSessionHourly, UsageSessionTotal
from playground.usage.session_rollups import COUNTED

HOUR = dt.timedelta(hours=1)
BATCH = 500  # totals walked per read
Measure = Literal["prompt_tokens", "peak_prompt_tokens"]


@dataclass(frozen=True)
class SessionSums:
    session: str  # a `usage.insights.sessions` key
    requests: int
    prompt_tokens: int
    peak_prompt_tokens: int

    def merged(self, other: SessionSums) -> SessionSums:
        return replace(
            self,
            requests=self.requests + other.requests,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            peak_prompt_tokens=max(self.peak_prompt_tokens, other.peak_prompt_tokens),
        )


def plain(filters: Filters) -> bool:
    """Whether the filters choose nothing but the team and period (what the rollups hold)."""
    return filters == Filters(
        team=filters.team, period=filters.period, group=filters.group, sort=filters.sort
    )


def top_sessions(filters: Filters, *, by: Measure, limit: int) -> list[SessionSums]:
    """The `limit` sessions of the period with the most `by` (largest first, then by key), each
    with its answered requests, prompt tokens and largest prompt in the period."""
    start, end = _period(filters)
    if start >= end:
        return []
    team = filters.team.pk
    first_whole = _hour_ceil(start)
    last_whole = max(first_whole, _hour_floor(end))
    edges = _record_sums(team, start, min(first_whole, end)) | _record_sums(team, last_whole, end)
    totals = UsageSessionTotal.objects.filter(team_id=team, first_at__lt=end, last_at__gte=start).order_by(
        f"-{by}", "session_key"
    )
    found: dict[str, SessionSums] = {}
    best: list[SessionSums] = []
    offset = 0
    while True:
        batch = list(totals.values_list("session_key", by)[offset : offset + BATCH])
        sums = _hour_sums(team, [key for key, _ in batch], first_whole, last_whole)
        for key, _ in batch:
            exact = _merged(sums.get(key), edges.get(key))
            if exact is not None:
                found[key] = exact
        best = sorted(found.values(), key=lambda s: (-getattr(s, by), s.session))[:limit]
        if len(batch) < BATCH or (len(best) == limit and batch[-1][1] < getattr(best[-1], by)):
            return best
        offset += BATCH


def _period(filters: Filters) -> tuple[dt.datetime, dt.datetime]:
    """The period, from the team's retention horizon on: the records before it are gone (the
    rollups keep them, but the fragments read the records next)."""
    start, end = filters.period.start, filters.period.end
    horizon = (
        TeamRetention.objects.filter(pk=filters.team.pk)
        .values_list("records_removed_before", flat=True)
        .first()
    )
    return (max(start, horizon) if horizon else start), end


def _hour_floor(at: dt.datetime) -> dt.datetime:
    return at.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)


def _hour_ceil(at: dt.datetime) -> dt.datetime:
    floor = _hour_floor(at)
    return floor if floor == at else floor + HOUR


def _merged(a: SessionSums | None, b: SessionSums | None) -> SessionSums | None:
    if a is None or b is None:
        return a or b
    return a.merged(b)


def _hour_sums(team: int, keys: list[str], start: dt.datetime, end: dt.datetime) -> dict[str, SessionSums]:
    """The sessions' sums over the whole hours [start, end)."""
    if not keys or start >= end:
        return {}
    rows = (
        UsageSessionHourly.objects.filter(
            team_id=team, session_key__in=keys, bucket__gte=start, bucket__lt=end
        )
        .order_by()
        .values("session_key")
        .annotate(requests=Sum("requests"), prompt=Sum("prompt_tokens"), peak=Max("peak_prompt_tokens"))
        .values_list("session_key", "requests", "prompt", "peak")
    )
    return {row[0]: SessionSums(*row) for row in rows}


def _record_sums(team: int, start: dt.datetime, end: dt.datetime) -> dict[str, SessionSums]:
    """Every session's sums over the records of [start, end) (less than an hour)."""
    if start >= end:
        return {}
    rows = (
        UsageRecord.objects.filter(COUNTED, team_id=team, created_at__gte=start, created_at__lt=end)
        .annotate(session_key=session_key_expression())
        .order_by()
        .values("session_key")
        .annotate(requests=Count("id"), prompt=Sum("prompt_tokens"), peak=Max("prompt_tokens"))
        .values_list("session_key", "requests", "prompt", "peak")
    )
    return {row[0]: SessionSums(*row) for row in rows}
