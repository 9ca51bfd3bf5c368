"""Cache hit ratio per session and per affinity key, with what the misses lost.

A session (`usage.insights.sessions`) is a conversation, else a gateway session, else an affinity key.
Each answered request after a session's first should find the previous prompt cached
(`expected_cached_tokens`); what it found short of that is lost (tokens, and money at the
record's card through `pricing.cache_miss_cost`). A miss is a request that fell short of that
by the cache-break detector's rule (`cache_breaks.fell_short`: more than a cache's own
granularity), and only a miss loses anything; a streak is a run of misses one after another.

Read from the raw records under every filter the request log takes (`request_log.log_records`),
bounded: the `SESSIONS_READ` sessions of the period with the most prompt tokens (a session
cannot lose more than its prompts; ranked from the session rollups when only the period is
chosen: `session_rankings`), and at most `ROWS_READ` of their records. A request
whose cached count is unknown (None) is counted in no ratio and loses nothing, and ends a
streak.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from itertools import groupby
from typing import Any

from django.db.models import QuerySet, Sum

from playground.analytics.filters import Filters
from playground.analytics.selectors.request_log import log_records
from playground.analytics.selectors.session_rankings import plain, top_sessions
from playground.catalog.models import PriceCard
from playground.usage.insights.cache_break_selectors import ANSWERED
from playground.usage.insights.cache_breaks import fell_short
from playground.usage.insights.sessions import (
    expected_cached_tokens,
    session_key_expression,
    sessions_filter,
)
from playground.usage.pricing import ZERO, cache_miss_cost

SESSIONS_READ = 200
ROWS_READ = 20_000
SHOWN = 15  # rows of each table, the most lost first


@dataclass(frozen=True)
class Request:
    """One answered request of a session, as the ratio reads it."""

    session: str
    affinity_key: str
    prompt_tokens: int
    cached_tokens: int | None
    card_id: int | None


@dataclass(frozen=True)
class Judged:
    """A request with what it should have found cached (None for a session's first)."""

    request: Request
    expected: int | None
    lost_tokens: int
    lost: Decimal

    @property
    def missed(self) -> bool:
        return self.lost_tokens > 0


@dataclass
class HitRow:
    key: str  # the session key, or the affinity key
    requests: int = 0
    prompt_tokens: int = 0  # of the requests whose cached count is known
    cached_tokens: int = 0
    lost_tokens: int = 0
    lost: Decimal = ZERO
    longest_streak: int = 0

    @property
    def hit_ratio(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    @property
    def hit_percent(self) -> str:
        ratio = self.hit_ratio
        return "not reported" if ratio is None else f"{ratio:.0%}"


@dataclass(frozen=True)
class HitRatios:
    sessions: list[HitRow]
    affinity_keys: list[HitRow]
    sessions_capped: bool  # more sessions in the period than were read
    rows_capped: bool  # their records were cut at ROWS_READ


def judge_session(requests: Sequence[Request], cards: dict[int, PriceCard]) -> list[Judged]:
    """Each request of one session (in order) against the prompt before it."""
    judged = []
    previous: Request | None = None
    for request in requests:
        if previous is None:
            judged.append(Judged(request, expected=None, lost_tokens=0, lost=ZERO))
        else:
            expected = expected_cached_tokens(
                previous_prompt_tokens=previous.prompt_tokens, prompt_tokens=request.prompt_tokens
            )
            cached = request.cached_tokens
            missed = cached is not None and fell_short(expected=expected, cached=cached)
            lost_tokens = expected - cached if missed and cached is not None else 0
            card = cards.get(request.card_id) if request.card_id is not None else None
            judged.append(
                Judged(
                    request,
                    expected=expected,
                    lost_tokens=lost_tokens,
                    lost=cache_miss_cost(tokens=lost_tokens, card=card),
                )
            )
        previous = request
    return judged


def hit_rows(judged: Iterable[Judged], *, key: Callable[[Request], str]) -> list[HitRow]:
    """Rows by `key`, the most lost first; streaks run over consecutive requests of one key
    (in the order given: session by session)."""
    rows: dict[str, HitRow] = {}
    streak_key, streak = "", 0
    for each in judged:
        name = key(each.request)
        if not name:
            streak_key, streak = "", 0
            continue
        row = rows.setdefault(name, HitRow(key=name))
        row.requests += 1
        if each.request.cached_tokens is not None:
            row.prompt_tokens += each.request.prompt_tokens
            row.cached_tokens += each.request.cached_tokens
        row.lost_tokens += each.lost_tokens
        row.lost += each.lost
        if name != streak_key:
            streak_key, streak = name, 0
        streak = streak + 1 if each.missed else 0
        row.longest_streak = max(row.longest_streak, streak)
    return sorted(rows.values(), key=lambda row: (-row.lost, -row.lost_tokens, row.key))


def hit_ratios(filters: Filters) -> HitRatios:
    records = (
        log_records(filters)
        .filter(status__in=ANSWERED, prompt_tokens__gt=0)
        .annotate(session_key=session_key_expression())
        .exclude(session_key="")
    )
    chosen = _chosen_sessions(filters, records)
    rows = list(
        # By their indexed columns: `session_key__in` would compute the key of every record of the period.
        records.filter(sessions_filter(chosen[:SESSIONS_READ]))
        .order_by("session_key", "created_at", "id")
        .values_list("session_key", "affinity_key", "prompt_tokens", "cached_tokens", "price_card_id")[
            : ROWS_READ + 1
        ]
    )
    requests = [Request(*row) for row in rows[:ROWS_READ]]
    cards = PriceCard.objects.in_bulk({r.card_id for r in requests if r.card_id is not None})
    judged = [
        each
        for _, session in groupby(requests, key=lambda r: r.session)
        for each in judge_session(list(session), cards)
    ]
    return HitRatios(
        sessions=hit_rows(judged, key=lambda r: r.session)[:SHOWN],
        affinity_keys=hit_rows(judged, key=lambda r: r.affinity_key)[:SHOWN],
        sessions_capped=len(chosen) > SESSIONS_READ,
        rows_capped=len(rows) > ROWS_READ,
    )


def _chosen_sessions(filters: Filters, records: QuerySet[Any]) -> list[str]:
    """The `SESSIONS_READ` sessions (and one more, to tell) with the most prompt tokens in the
    period: from the session rollups when no filter but the period is chosen, else by grouping
    the filtered records."""
    if plain(filters):
        return [s.session for s in top_sessions(filters, by="prompt_tokens", limit=SESSIONS_READ + 1)]
    return list(
        records.order_by()
        .values("session_key")
        .annotate(prompt=Sum("prompt_tokens"))
        .order_by("-prompt", "session_key")
        .values_list("session_key", flat=True)[: SESSIONS_READ + 1]
    )
