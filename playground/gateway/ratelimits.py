"""Per-key rate limits (requests and tokens per minute), on the shared limiter (`lib.ratelimit`).

Requests are counted when admitted; tokens once the answer's usage is known, so a request is
admitted while the minute's tokens are not used up, and its own tokens count against the rest
of the minute (a request's size cannot be known before it runs).
"""

from __future__ import annotations

import asyncio
import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from limits.util import WindowStats

from playground.gateway.errors import GatewayError
from playground.lib.asyncutil import GroupQueue, loop_local
from playground.lib.db import db_run
from playground.lib.metrics import RATE_LIMIT_REFUSALS
from playground.lib.ratelimit import MinuteLimit, seconds_left
from playground.usage.models import ApiKey


@dataclass(frozen=True)
class RateState:
    """What the answer's `x-ratelimit-*` headers say (OpenAI's names)."""

    headers: dict[str, str]


def rate_admit_many(keys: Sequence[ApiKey]) -> list[RateState | GatewayError]:
    """Count requests admitted together against their keys' limits, in order (one per key given):
    each one's state or `GatewayError` (429 with `Retry-After`). Each request is counted, and
    refused, by its own hit, but each key's windows are read once for the
    group (in Redis, two round trips per read: the production profile's admission spent half its
    time waiting on them, issue 24). `remaining` counts down from that read."""
    windows: dict[tuple[int, str], WindowStats] = {}
    counted: Counter[int] = Counter()  # requests of each key this group has counted so far

    def window(key: ApiKey, limit: MinuteLimit) -> WindowStats:
        if (key.pk, limit.kind) not in windows:
            windows[key.pk, limit.kind] = limit.window(_who(key))
        return windows[key.pk, limit.kind]

    states: list[RateState | GatewayError] = []
    for key in keys:
        headers: dict[str, str] = {}
        if key.tokens_per_minute:
            stats = window(key, _limit("tokens", key.tokens_per_minute))
            if stats.remaining <= 0:
                states.append(_limited(key, "tokens", key.tokens_per_minute, stats.reset_time))
                continue
            headers |= _headers("tokens", key.tokens_per_minute, stats.remaining, stats.reset_time)
        if key.requests_per_minute:
            limit = _limit("requests", key.requests_per_minute)
            stats = window(key, limit)
            admitted = limit.hit(_who(key))
            counted[key.pk] += 1
            if not admitted:
                states.append(_limited(key, "requests", key.requests_per_minute, stats.reset_time))
                continue
            remaining = stats.remaining - counted[key.pk]
            headers |= _headers("requests", key.requests_per_minute, remaining, stats.reset_time)
        states.append(RateState(headers))
    return states


def rate_count_tokens(counts: Sequence[tuple[ApiKey, int]]) -> None:
    """Add finished requests' tokens (in and out) to their keys' minutes: one hit per key."""
    totals: dict[int, tuple[ApiKey, int]] = {}
    for key, tokens in counts:
        if key.tokens_per_minute and tokens > 0:
            totals[key.pk] = (key, totals.get(key.pk, (key, 0))[1] + tokens)
    for key, tokens in totals.values():
        assert key.tokens_per_minute is not None
        _limit("tokens", key.tokens_per_minute).hit(_who(key), cost=tokens)


async def rate_tokens_counted(key: ApiKey, tokens: int) -> None:
    """Count a finished request's tokens with those of the requests finishing meanwhile (one
    step of the database thread for the group, not one each; the counters may be in Redis)."""
    await loop_local(_token_queues, _token_queue).submit((key, tokens))


type _TokenQueue = GroupQueue[tuple[ApiKey, int], None]
_token_queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _TokenQueue] = weakref.WeakKeyDictionary()


def _token_queue() -> _TokenQueue:
    async def count(group: list[tuple[ApiKey, int]]) -> list[Exception | None]:
        await db_run(partial(rate_count_tokens, group))
        return [None] * len(group)

    return GroupQueue(count)


def _limit(kind: str, amount: int) -> MinuteLimit:
    return MinuteLimit("gateway", kind, amount)


def _headers(kind: str, limit: int, remaining: int, reset_time: float) -> dict[str, str]:
    return {
        f"x-ratelimit-limit-{kind}": str(limit),
        f"x-ratelimit-remaining-{kind}": str(max(0, remaining)),
        f"x-ratelimit-reset-{kind}": f"{seconds_left(reset_time)}s",
    }


def _limited(key: ApiKey, kind: str, limit: int, reset_time: float) -> GatewayError:
    RATE_LIMIT_REFUSALS.labels("gateway", kind).inc()
    wait = seconds_left(reset_time)
    return GatewayError(
        429,
        "rate_limit_exceeded",
        f"The API key {key.name!r} may send {limit} {kind} a minute and has used them: "
        f"try again in {wait} s. Nothing was sent.",
        headers={"retry-after": str(wait), **_headers(kind, limit, 0, reset_time)},
    )


def _who(key: ApiKey) -> str:
    """The counter's name: the id and the random prefix, so a database made afresh (a test run)
    never meets a counter Redis still holds for an old key with the same id."""
    return f"{key.pk}:{key.prefix}"
