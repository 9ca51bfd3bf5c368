"""Why a session's prefix stopped being cached: each request against the one before it.

For every request of a session after the first, the detector asks whether the cached tokens
that came back are what an intact prefix would give (the whole previous prompt,
`sessions.expected_cached_tokens`). Only where they fall short by more than a cache's own
granularity is there a break, and then the first section that differs, in the order a
prefix cache reads them, names the cause. A request that only appends (the new turn) has an
intact prefix, so a growing conversation never breaks unless its cache was lost: that is
what keeps a "cached share dropped" rule's false breaks out.

Pure: callers hand in the session's requests in order (`usage.insights.cache_break_selectors` reads
them from the records).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from playground.catalog.models import PriceCard
from playground.usage.insights.sessions import expected_cached_tokens
from playground.usage.prefix_digest import PrefixDigest
from playground.usage.pricing import cache_miss_cost

# A cache hands back whole blocks, and a template may re-render a token or two of the last
# answer differently, so an intact prefix may come back a little short: a break loses more
# than this many tokens and this share of what was expected.
TOLERATED_TOKENS = 32
TOLERATED_SHARE = 0.02
# Below this a provider may not cache at all (OpenAI caches from 1,024 tokens): no verdict.
MIN_CACHEABLE_TOKENS = 64


class Cause(StrEnum):
    """Why a prefix was not cached; the value is what exports and the command print."""

    MODEL_CHANGED = "model_changed"
    ROUTE_CHANGED = "route_changed"  # a routing policy moved the session to another target
    TOOLS_CHANGED = "tools_changed"
    SYSTEM_CHANGED = "system_changed"
    FORMAT_CHANGED = "response_format_changed"
    HISTORY_CHANGED = "history_changed"
    AFFINITY_MISSING = "affinity_missing"
    AFFINITY_CHANGED = "affinity_changed"
    EVICTED = "evicted"
    OTHER = "other"


@dataclass(frozen=True)
class SessionRequest:
    """What the detector reads of one record."""

    record_id: int
    model_id: str
    digest: PrefixDigest | None
    affinity_key: str
    prompt_tokens: int
    cached_tokens: int | None
    succeeded: bool
    card: PriceCard | None = None
    created_at: dt.datetime | None = None
    connection_id: int | None = None
    routed: bool = False  # a routing policy chose its target (the record's `route_rule` or fall-back)


@dataclass(frozen=True)
class CacheBreak:
    record_id: int
    previous_record_id: int
    session: str
    turn: int  # the request's place in the session (1: the first request)
    cause: Cause
    detail: str  # e.g. "the tools list was reordered"
    cached_tokens: int
    expected_cached_tokens: int
    lost_usd: Decimal
    changed_turn: int | None = None  # history_changed: the user turn whose messages changed
    created_at: dt.datetime | None = None

    @property
    def lost_tokens(self) -> int:
        return self.expected_cached_tokens - self.cached_tokens


def session_breaks(session: str, requests: Iterable[SessionRequest]) -> Iterator[CacheBreak]:
    """The breaks among a session's requests, given oldest first.

    Failed requests are skipped: nothing of theirs was cached, so the next request is
    compared with the last one that was answered.
    """
    previous: SessionRequest | None = None
    turn = 0
    for current in requests:
        if not current.succeeded:
            continue
        turn += 1
        if previous is not None:
            found = _break(session, turn, previous, current)
            if found is not None:
                yield found
        previous = current


def _break(session: str, turn: int, previous: SessionRequest, current: SessionRequest) -> CacheBreak | None:
    if current.cached_tokens is None:  # the provider does not say: no verdict
        return None
    expected = expected_cached_tokens(
        previous_prompt_tokens=previous.prompt_tokens, prompt_tokens=current.prompt_tokens
    )
    if not fell_short(expected=expected, cached=current.cached_tokens):
        return None
    lost = expected - current.cached_tokens
    cause, detail, changed_turn = diagnose(previous, current)
    return CacheBreak(
        record_id=current.record_id,
        previous_record_id=previous.record_id,
        session=session,
        turn=turn,
        cause=cause,
        detail=detail,
        cached_tokens=current.cached_tokens,
        expected_cached_tokens=expected,
        lost_usd=cache_miss_cost(tokens=lost, card=current.card),
        changed_turn=changed_turn,
        created_at=current.created_at,
    )


def fell_short(*, expected: int, cached: int) -> bool:
    """Whether `cached` tokens are fewer than an intact prefix of `expected` would bring back,
    beyond a cache's own granularity (the one rule for a break and for a miss)."""
    lost = expected - cached
    return expected >= MIN_CACHEABLE_TOKENS and lost > max(TOLERATED_TOKENS, TOLERATED_SHARE * expected)


def may_break(*, prompt_tokens: int, cached_tokens: int | None) -> bool:
    """Whether a request could be a break at all, read from its own counts: an intact prefix
    brings back at most the whole prompt, so one that fell short of none of it cannot have
    fallen short of the previous prompt (the record writer skips the session's look-up then)."""
    return cached_tokens is not None and fell_short(expected=prompt_tokens, cached=cached_tokens)


def diagnose(previous: SessionRequest, current: SessionRequest) -> tuple[Cause, str, int | None]:
    """The first section that differs, in the order a prefix cache reads them; if none does,
    why an intact prefix was not found."""
    moved = current.model_id != previous.model_id or current.connection_id != previous.connection_id
    if moved and current.routed:
        return (
            Cause.ROUTE_CHANGED,
            f"the routing policy sent it to {current.model_id} on another target",
            None,
        )
    if current.model_id != previous.model_id:
        return Cause.MODEL_CHANGED, f"the model changed from {previous.model_id} to {current.model_id}", None
    before, after = previous.digest, current.digest
    if before is None or after is None:
        return Cause.OTHER, "the request body of one of the two requests was not kept", None
    if before.tools != after.tools:
        return Cause.TOOLS_CHANGED, _tools_change(before.tools, after.tools), None
    if before.system != after.system:
        return Cause.SYSTEM_CHANGED, _system_change(before.system, after.system), None
    if set(after.later_system) - set(before.later_system):
        return (
            Cause.SYSTEM_CHANGED,
            "a system message was added mid-conversation (templates render it with the system prompt)",
            None,
        )
    if before.answer_format != after.answer_format:
        return Cause.FORMAT_CHANGED, _format_change(before.answer_format, after.answer_format), None
    history = _history_change(before, after)
    if history is not None:
        return Cause.HISTORY_CHANGED, *history
    if not current.affinity_key:
        return Cause.AFFINITY_MISSING, "the request carried no session affinity key", None
    if current.affinity_key != previous.affinity_key:
        return Cause.AFFINITY_CHANGED, "the session affinity key changed", None
    return Cause.EVICTED, "the prefix was intact: expired, evicted or served by another replica", None


def _tools_change(before: tuple[str, ...], after: tuple[str, ...]) -> str:
    if Counter(before) == Counter(after):
        return "the tools list was reordered"
    added, removed = len(set(after) - set(before)), len(set(before) - set(after))
    parts = [
        f"{count} {what}" for count, what in ((added, "added or changed"), (removed, "removed")) if count
    ]
    return "the tools list changed: " + ", ".join(parts) if parts else "the tools list changed"


def _format_change(before: str, after: str) -> str:
    if not before:
        return "a JSON response format was added"
    if not after:
        return "the JSON response format was removed"
    return "the JSON response format changed"


def _system_change(before: str, after: str) -> str:
    if not before:
        return "a system prompt was added"
    if not after:
        return "the system prompt was removed"
    return "the system prompt changed"


def _history_change(before: PrefixDigest, after: PrefixDigest) -> tuple[str, int | None] | None:
    """How the messages the previous request sent differ at the start of the current one."""
    old, new = before.messages, after.messages
    index = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), None)
    if index is None:
        if len(new) >= len(old):
            return None  # only appended: the new turn
        index = len(new)
    turn = before.user_turns[index] if index < len(before.user_turns) else None
    where = f"turn {turn}" if turn else "the start of the conversation"
    if index >= len(new) or (index + 1 < len(old) and new[index] == old[index + 1]):
        return f"a message of {where} was removed", turn
    if index + 1 < len(new) and new[index + 1] == old[index]:
        return f"a message was inserted at {where}", turn
    if Counter(old) == Counter(new[: len(old)]):
        return f"messages from {where} on were reordered", turn
    return f"a message of {where} was edited", turn


CAUSE_LABELS = {
    Cause.MODEL_CHANGED: "Model changed",
    Cause.ROUTE_CHANGED: "Route changed",
    Cause.FORMAT_CHANGED: "Response format changed",
    Cause.TOOLS_CHANGED: "Tools changed",
    Cause.SYSTEM_CHANGED: "System prompt changed",
    Cause.HISTORY_CHANGED: "History changed",
    Cause.AFFINITY_MISSING: "No affinity key",
    Cause.AFFINITY_CHANGED: "Affinity key changed",
    Cause.EVICTED: "Evicted or expired",
    Cause.OTHER: "Other",
}
