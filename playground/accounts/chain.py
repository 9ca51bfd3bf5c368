"""A team's decision records in one hash chain (issue 37): what was decided cannot be changed,
removed or slipped in afterwards without `manage.py audit_verify` finding where.

Each entry (an audit event, a routing policy version) carries its place in the team's chain,
the SHA-256 of its canonical content, and the hash of the entry before it; the team's
`DecisionChain` row holds the length and the last hash, so losing the newest entries shows too.
The content leaves out what changes by itself: who acted as an account (`SET_NULL` when the
account goes; the name kept beside it is chained).

Appends are serialized per team by locking the team's `DecisionChain` row before reading it:
on PostgreSQL `SELECT ... FOR UPDATE` waits for the writer before and then reads the head it
committed; on SQLite a write to the row takes the database's write lock first. A unique place
per team and kind backs that up: a writer that read a stale head fails, it cannot fork the chain.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from django.db import IntegrityError, connection, models, transaction
from django.db.models import F

from playground.accounts.models import AuditEvent, ChainedEntry, DecisionChain

GENESIS = "0" * 64

type Content = dict[str, object]


class Chained(Protocol):
    """What the content functions read; historical models in migrations have it too."""

    pk: Any
    team_id: int
    chain_seq: int | None
    chain_digest: str
    chain_prev: str


@dataclass(frozen=True)
class ChainKind:
    """One kind of entry in the chain: its name (hashed into each link, so an entry cannot be
    passed off as another kind), its model and the fields that are its content."""

    name: str
    label: str
    model: type[ChainedEntry]
    fields: tuple[str, ...]

    def content(self, row: Any) -> Content:
        """`row` may be a historical model of a migration: only its fields are read."""
        return {field: getattr(row, field) for field in self.fields}


def _plain(value: object) -> object:
    """JSON as every database gives it back: PostgreSQL's jsonb returns 2.0 as 2.0 but 1e20 as an
    integer, so integral floats are integers here."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def canonical(content: Content) -> bytes:
    """Sorted keys, no spaces, UTF-8, times as UTC ISO 8601 to the microsecond."""

    def default(value: object) -> str:
        if isinstance(value, dt.datetime):
            return value.astimezone(dt.UTC).isoformat(timespec="microseconds")
        raise TypeError(f"{type(value).__name__} is not part of a chained entry's content")

    # Dumped and read once so keys are strings and tuples lists, as the database returns them.
    plain = _plain(json.loads(json.dumps(content, default=default)))
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def content_digest(content: Content) -> str:
    return hashlib.sha256(canonical(content)).hexdigest()


def link_hash(*, seq: int, kind: str, digest: str, prev: str) -> str:
    return hashlib.sha256(f"{seq}|{kind}|{digest}|{prev}".encode()).hexdigest()


AUDIT_EVENTS = ChainKind(
    "audit_event",
    "audit event",
    AuditEvent,
    ("team_id", "actor_name", "action", "target", "detail", "created_at"),
)


def chain_append[E: models.Model](entry: E, *, kind: ChainKind) -> E:
    """Save the new `entry` as the next link of its team's chain (in the caller's transaction)."""
    chained: Any = entry
    team_id = chained.team_id
    with transaction.atomic():
        length, head = head_locked(DecisionChain, team_id)
        chained.chain_seq = length + 1
        chained.chain_prev = head or GENESIS
        chained.chain_digest = content_digest(kind.content(entry))
        entry.save(force_insert=True)
        new_head = link_hash(
            seq=chained.chain_seq, kind=kind.name, digest=chained.chain_digest, prev=chained.chain_prev
        )
        DecisionChain.objects.filter(team_id=team_id).update(length=chained.chain_seq, head=new_head)
    return entry


def head_locked(model: type[models.Model], team_id: int) -> tuple[int, str]:
    """The team's chain length and last hash, locked until the transaction ends (see the module
    docstring): one `SELECT ... FOR UPDATE` on PostgreSQL; on SQLite, which has no row locks, a
    write that takes the database's write lock, then the read. `model` is the chain's head, a
    row per team with `length` and `head` (`DecisionChain`, or the routing seals' own)."""
    heads = model._default_manager.filter(team_id=team_id)
    for _ in range(2):  # a second pass after making the team's head
        if connection.features.has_select_for_update:
            found = heads.select_for_update().values_list("length", "head").first()
        else:
            found = heads.values_list("length", "head").first() if heads.update(length=F("length")) else None
        if found is not None:
            return int(found[0]), str(found[1])
        try:
            with transaction.atomic():
                model._default_manager.create(team_id=team_id)
        except IntegrityError:
            pass  # another writer made it first
    raise RuntimeError(f"The {model._meta.verbose_name} of team {team_id} could not be locked.")


# --- verification -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ChainBreak:
    """A broken link: `what` is "changed", "deleted" or "inserted"."""

    what: str
    seq: int | None
    entry: str
    explanation: str

    def __str__(self) -> str:
        place = f"entry {self.seq}" if self.seq is not None else "outside the chain"
        return f"{place} ({self.entry}): {self.what}: {self.explanation}"


@dataclass(frozen=True)
class ChainStatus:
    entries: int
    head: str
    breaks: list[ChainBreak]

    @property
    def intact(self) -> bool:
        return not self.breaks

    def __str__(self) -> str:
        if self.intact:
            return f"intact, {self.entries} entries (head {self.head[:16]})"
        more = f" ({len(self.breaks) - 1} more problems after it)" if len(self.breaks) > 1 else ""
        return f"broken at {self.breaks[0]}{more}"


@dataclass(frozen=True)
class _Row:
    kind: ChainKind
    row: Chained

    @property
    def name(self) -> str:
        return f"{self.kind.label} #{self.row.pk}"


def chain_verify(*, team_id: int, kinds: Sequence[ChainKind]) -> ChainStatus:
    """Walk the team's chain from the first entry and say where it breaks, first break first."""
    recorded = DecisionChain.objects.filter(team_id=team_id).values_list("length", "head").first()
    length, head = recorded or (0, "")
    by_seq: dict[int, list[_Row]] = {}
    breaks: list[ChainBreak] = []
    outside: list[ChainBreak] = []
    for kind in kinds:
        model: Any = kind.model  # each kind's model has a team; their base class has none
        for row in model._default_manager.filter(team_id=team_id).order_by("pk"):
            if row.chain_seq is None:
                outside.append(
                    ChainBreak("inserted", None, _Row(kind, row).name, "it carries no link of the chain")
                )
            else:
                by_seq.setdefault(row.chain_seq, []).append(_Row(kind, row))
    prev = GENESIS
    for seq in range(1, max([length, *by_seq]) + 1):
        found = by_seq.get(seq, [])
        if not found:
            breaks.append(ChainBreak("deleted", seq, "missing", f"no entry holds place {seq} of {length}"))
            continue
        for extra in found[1:]:
            holder = f"{found[0].name} already holds this place"
            breaks.append(ChainBreak("inserted", seq, extra.name, holder))
        entry = found[0]
        if seq > length:
            breaks.append(
                ChainBreak("inserted", seq, entry.name, f"the chain recorded {length} entries, not {seq}")
            )
        elif content_digest(entry.kind.content(entry.row)) != entry.row.chain_digest:
            breaks.append(
                ChainBreak("changed", seq, entry.name, "its content does not have its recorded hash")
            )
        elif entry.row.chain_prev != prev and (before := by_seq.get(seq - 1)):
            # The entry before was rewritten with a new hash of its own (or this link was).
            rewritten = f"its hash is not the one entry {seq} recorded: its content and hash were rewritten"
            breaks.append(ChainBreak("changed", seq - 1, before[0].name, rewritten))
        link = entry.row
        prev = link_hash(seq=seq, kind=entry.kind.name, digest=link.chain_digest, prev=link.chain_prev)
    if length and not breaks and prev != head:
        breaks.append(ChainBreak("changed", length, "the last entry", "the chain's recorded head differs"))
    entries = sum(len(rows) for rows in by_seq.values())
    return ChainStatus(entries=entries, head=head, breaks=breaks + outside)
