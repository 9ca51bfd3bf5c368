"""Sessions for gateway clients that name none: inferred from the prompt prefix.

Most clients send neither `x-playground-session` nor `x-session-affinity`, and clients of the
Workers AI convention send only the affinity key, which they may drop or change between turns:
grouped by that key, such a client's turns fell apart and its cache breaks went unreported. So
an API key's records that name no session (and belong to no conversation) are chained instead:
a request joins the open session of the same key and end user whose last request its prompt
extends (the messages sent before, then more), else the one that began with the same first
message (an edited turn, a changed system prompt or tools: still that conversation); else it
starts a session of its own. A session is open for `OPEN_FOR` after its last request.

Inferred at read time, by the detector: nothing is added to a request's path.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Q

from playground.usage.prefix_digest import PrefixDigest

INFERRED = "inferred:"
OPEN_FOR = dt.timedelta(minutes=30)
# The records whose session is inferred: a key's, naming no session, in no conversation.
INFERRABLE = Q(conversation_id__isnull=True, session="", api_key__isnull=False)


@dataclass(frozen=True)
class Turn[T]:
    """One record with what the chaining reads of it."""

    item: T
    record_id: int
    owner: tuple[int, str]  # its API key and end user
    at: dt.datetime
    digest: PrefixDigest | None


@dataclass
class _Open[T]:
    name: str
    turns: list[Turn[T]] = field(default_factory=list)


def sessions_infer[T](turns: Iterable[Turn[T]]) -> list[tuple[str, list[T]]]:
    """The inferred sessions of `turns` (oldest first), each named "inferred:<key>:<its first
    record>", with its items in order."""
    sessions: list[_Open[T]] = []
    by_owner: dict[tuple[int, str], list[_Open[T]]] = {}
    for turn in turns:
        candidates = [
            each for each in by_owner.get(turn.owner, []) if turn.at - each.turns[-1].at <= OPEN_FOR
        ]
        joined = _extended(candidates, turn) or _same_start(candidates, turn)
        if joined is None:
            joined = _Open(f"{INFERRED}{turn.owner[0]}:{turn.record_id}")
            sessions.append(joined)
            by_owner.setdefault(turn.owner, []).append(joined)
        joined.turns.append(turn)
    return [(each.name, [turn.item for turn in each.turns]) for each in sessions]


def _extended[T](candidates: list[_Open[T]], turn: Turn[T]) -> _Open[T] | None:
    """The latest session whose last request's messages this one starts with and goes past."""
    if turn.digest is None:
        return None
    for each in reversed(candidates):
        last = each.turns[-1].digest
        if last is not None and _prefix(last.messages, turn.digest.messages):
            return each
    return None


def _same_start[T](candidates: list[_Open[T]], turn: Turn[T]) -> _Open[T] | None:
    if turn.digest is None or not turn.digest.messages:
        return None
    for each in reversed(candidates):
        last = each.turns[-1].digest
        if last is not None and last.messages and last.messages[0] == turn.digest.messages[0]:
            return each
    return None


def _prefix(before: tuple[str, ...], after: tuple[str, ...]) -> bool:
    return 0 < len(before) < len(after) and after[: len(before)] == before
