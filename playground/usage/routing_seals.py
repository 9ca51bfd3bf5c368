"""Routing decisions sealed in a hash chain per team (issue 37), after the request, never in it.

Chaining each gateway request as it is written would serialize a team's requests on its chain's
head row. Instead the beat's sealer (`routing_seal_sweep`, every minute) appends one `decision`
entry per routed record older than `ROUTING_SEAL_SETTLE_SECONDS` that has none yet, in batches
of `ROUTING_SEAL_BATCH`, each batch one transaction holding the chain's head (`head_locked`):
two sealers take turns and the second finds the first's records sealed; a killed one loses only
its open batch. It picks records from where it last came to (`sealed_until`) less
`ROUTING_SEAL_MARGIN_SECONDS`, for a record whose transaction committed after a later one's, and
skips the sealed ones.

An entry holds the record's id, request id and time and a salted SHA-256 of its decision
(`decision_content`: the routing detail, rule, fall-back and downgrade), never the decision or
a prompt. Retention deletes records and an end user's erasure rewrites their routing detail, so
each adds an entry of its own naming the sealed decisions it removed or rewrote, in the same
transaction as the change, and blanks their salts: the old digests then match nothing anyone
could guess (an erased end user's id in the routing detail), while the links stay whole. An
erasure seals the rewritten decisions again at once.

`routing_chain_verify` walks the links and checks every routed record still there against its
latest seal: a change, a deletion no run accounts for, a blanked salt or a record older than the
sealed point without a seal is a problem; deletions by retention and rewrites by erasure are
counted as accounted for.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from playground.accounts.chain import GENESIS, Content, content_digest, head_locked, link_hash
from playground.accounts.models import Team
from playground.usage.models import RoutingSeal, RoutingSealChain, SealKind, UsageRecord

# What a record's decision is: the columns the routing policy wrote (`calls.context.RouteRecord`).
DECISION_FIELDS = ("routing", "route_rule", "route_fell_back", "route_downgraded")
RECORD_FIELDS = ("pk", "request_id", "created_at", *DECISION_FIELDS)


def decision_content(row: dict[str, Any]) -> Content:
    return {name: row[name] for name in DECISION_FIELDS}


def decision_digest(row: dict[str, Any], salt: str) -> str:
    """Of the decision as the database gives it back, sealing and verifying alike: plain JSON,
    so one `json.dumps` in canonical form (`accounts.chain.canonical` also converts times and
    round-trips, which costs a third of sealing)."""
    plain = json.dumps(decision_content(row), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{salt}|{plain}".encode()).hexdigest()


def entry_content(seal: RoutingSeal) -> Content:
    """What a link's hash covers (not the salt, which a run may blank)."""
    if seal.kind == SealKind.DECISION:
        return {
            "team_id": seal.team_id,
            "record_id": seal.record_id,
            "request_id": str(seal.request_id),
            "decided_at": seal.decided_at,
            "decision_digest": seal.decision_digest,
            "sealed_at": seal.sealed_at,
        }
    return {"team_id": seal.team_id, "detail": seal.detail, "sealed_at": seal.sealed_at}


# --- sealing ------------------------------------------------------------------------------------


def _routed(team_id: int) -> Any:
    return UsageRecord.objects.filter(team_id=team_id, routing__isnull=False)


def _unsealed(team_id: int, *, since: dt.datetime | None, until: dt.datetime) -> Any:
    sealed = RoutingSeal.objects.filter(team_id=team_id, record_id=OuterRef("pk"))
    rows = _routed(team_id).filter(created_at__lt=until).filter(~Exists(sealed))
    if since is not None:
        rows = rows.filter(created_at__gte=since)
    return rows.order_by("created_at", "id")


def _since(sealed_until: dt.datetime | None) -> dt.datetime | None:
    margin = dt.timedelta(seconds=settings.ROUTING_SEAL_MARGIN_SECONDS)
    return sealed_until - margin if sealed_until is not None else None


def routing_seal_batch(*, team_id: int, after: dt.datetime | None = None) -> tuple[int, dt.datetime]:
    """Seal up to `ROUTING_SEAL_BATCH` of the team's unsealed decisions in one transaction, from
    where the last run came to less the margin, or from `after` (the previous batch of this
    run: a backlog is read once, not a margin again per batch); (how many, where it came to)."""
    batch = settings.ROUTING_SEAL_BATCH
    now = timezone.now()
    until = now - dt.timedelta(seconds=settings.ROUTING_SEAL_SETTLE_SECONDS)
    state = RoutingSealChain.objects.filter(team_id=team_id).first()
    since = after or _since(state.sealed_until if state else None)
    if not _unsealed(team_id, since=since, until=until).exists():
        return 0, until  # the usual minute: nothing new, and no lock taken
    with transaction.atomic():
        length, head = head_locked(RoutingSealChain, team_id)
        locked = RoutingSealChain.objects.get(team_id=team_id)
        # Read after the lock: another sealer's batch is committed and skipped here.
        since = after or _since(locked.sealed_until)
        page = list(_unsealed(team_id, since=since, until=until).values(*RECORD_FIELDS)[:batch])
        seals = _decisions_sealed(team_id, page, length=length, head=head, now=now)
        if seals:
            locked.length, locked.head = seals[-1].seq, _link(seals[-1])
            locked.last_sealed_at = now
        # A full page may leave records of its last instant: the next batch starts there.
        reached = page[-1]["created_at"] if len(page) == batch else until
        locked.sealed_until = max(reached, locked.sealed_until or reached)
        locked.save()
    return len(page), reached


def routing_seal_team(*, team_id: int, deadline: float | None = None) -> tuple[int, bool]:
    """Batches until the team's decisions are sealed or `time.monotonic()` passes `deadline`:
    (how many were sealed, whether all were)."""
    sealed, after = 0, None
    while deadline is None or time.monotonic() < deadline:
        count, after = routing_seal_batch(team_id=team_id, after=after)
        sealed += count
        if count < settings.ROUTING_SEAL_BATCH:
            return sealed, True
    return sealed, False


def routing_seal_sweep(*, deadline: float | None = None) -> tuple[int, bool]:
    """Every team's; (sealed, whether everything was). A team with nothing new costs one read of
    its head and one of its routed records' index."""
    sealed, finished = 0, True
    for team_id in Team.objects.order_by("pk").values_list("pk", flat=True):
        count, done = routing_seal_team(team_id=team_id, deadline=deadline)
        sealed, finished = sealed + count, finished and done
    return sealed, finished


def _decisions_sealed(
    team_id: int, rows: list[dict[str, Any]], *, length: int, head: str, now: dt.datetime
) -> list[RoutingSeal]:
    """`rows` (records' `RECORD_FIELDS`) appended as decision entries after `length`/`head`."""
    seals = []
    prev = head or GENESIS
    for offset, row in enumerate(rows, start=1):
        salt = secrets.token_hex(16)
        seal = RoutingSeal(
            team_id=team_id,
            seq=length + offset,
            kind=SealKind.DECISION,
            record_id=row["pk"],
            request_id=row["request_id"],
            decided_at=row["created_at"],
            decision_digest=decision_digest(row, salt),
            salt=salt,
            sealed_at=now,
            prev=prev,
        )
        seal.digest = content_digest(entry_content(seal))
        prev = _link(seal)
        seals.append(seal)
    RoutingSeal.objects.bulk_create(seals)
    return seals


def _link(seal: RoutingSeal) -> str:
    return link_hash(seq=seal.seq, kind=seal.kind, digest=seal.digest, prev=seal.prev)


# --- retention and erasure ----------------------------------------------------------------------


ID_CHUNK = 500  # record ids per `IN (...)`: SQLite caps a statement's parameters


def _sealed_ids(team_id: int, record_ids: Collection[int]) -> list[int]:
    """Those of `record_ids` with a sealed decision, in order."""
    ordered = sorted(record_ids)
    found: set[int] = set()
    for start in range(0, len(ordered), ID_CHUNK):
        chunk = ordered[start : start + ID_CHUNK]
        rows = RoutingSeal.objects.filter(team_id=team_id, kind=SealKind.DECISION, record_id__in=chunk)
        found.update(record_id for record_id in rows.values_list("record_id", flat=True) if record_id)
    return sorted(found)


def routing_seals_of(*, team_id: int, record_ids: Collection[int]) -> int:
    """How many of `record_ids` have a sealed decision (what a removal would name)."""
    return len(_sealed_ids(team_id, record_ids))


def seals_account_removed(*, team_id: int, record_ids: Collection[int], kind: SealKind) -> int:
    """In the caller's transaction, before it deletes (`RETENTION`) or rewrites (`ERASURE`) the
    routing of `record_ids`: an entry naming those with a seal, their salts blanked; after a
    rewrite, call `seals_renew`. How many sealed decisions it names."""
    if not record_ids:
        return 0
    with transaction.atomic():
        length, head = head_locked(RoutingSealChain, team_id)
        # Read after the lock: a sealer that sealed one of them meanwhile has committed.
        named = _sealed_ids(team_id, record_ids)
        if not named:
            return 0
        for start in range(0, len(named), ID_CHUNK):
            chunk = named[start : start + ID_CHUNK]
            RoutingSeal.objects.filter(team_id=team_id, kind=SealKind.DECISION, record_id__in=chunk).update(
                salt=""
            )
        now = timezone.now()
        seal = RoutingSeal(
            team_id=team_id,
            seq=length + 1,
            kind=kind,
            detail={"decisions": len(named), "record_ids": named},
            sealed_at=now,
            prev=head or GENESIS,
        )
        seal.digest = content_digest(entry_content(seal))
        seal.save(force_insert=True)
        RoutingSealChain.objects.filter(team_id=team_id).update(length=seal.seq, head=_link(seal))
    return len(named)


def seals_renew(*, team_id: int, record_ids: Collection[int]) -> int:
    """In the caller's transaction, after an erasure rewrote the routing of `record_ids` and
    `seals_account_removed` named them: those that were sealed, sealed again as they are now,
    so they stay checked. How many."""
    renewed = _sealed_ids(team_id, record_ids)
    if not renewed:
        return 0
    with transaction.atomic():
        length, head = head_locked(RoutingSealChain, team_id)
        rows: list[dict[str, Any]] = []
        for start in range(0, len(renewed), ID_CHUNK):
            chunk = _routed(team_id).filter(pk__in=renewed[start : start + ID_CHUNK])
            rows.extend(chunk.order_by("created_at", "id").values(*RECORD_FIELDS))
        seals = _decisions_sealed(team_id, rows, length=length, head=head, now=timezone.now())
        if seals:
            RoutingSealChain.objects.filter(team_id=team_id).update(
                length=seals[-1].seq, head=_link(seals[-1])
            )
    return len(seals)


# --- verification -------------------------------------------------------------------------------


@dataclass
class SealReport:
    """What `routing_chain_verify` found; `problems` empty: nothing was tampered with."""

    entries: int = 0
    checked: int = 0  # decisions still there, matched to their seals
    deleted_by_retention: int = 0
    rewritten_by_erasure: int = 0
    pending: int = 0  # routed records newer than the sealed point, not sealed yet
    sealed_until: dt.datetime | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        head = "intact" if self.intact else f"{len(self.problems)} problem(s)"
        return (
            f"{head}: {self.entries} entries, {self.checked} decisions match their seals, "
            f"{self.deleted_by_retention} deleted by retention, {self.rewritten_by_erasure} rewritten "
            f"by erasure (sealed again), {self.pending} not sealed yet"
        )


@dataclass(frozen=True)
class _Sealed:
    seq: int
    request_id: str
    decided_at: dt.datetime
    decision_digest: str
    salt: str


def routing_chain_verify(*, team_id: int) -> SealReport:
    state = RoutingSealChain.objects.filter(team_id=team_id).first()
    report = SealReport(sealed_until=state.sealed_until if state else None)
    latest: dict[int, _Sealed] = {}
    removed: dict[int, tuple[str, int]] = {}  # record id -> (run kind, its entry's place)
    prev, expected = GENESIS, 1
    for seal in RoutingSeal.objects.filter(team_id=team_id).order_by("seq").iterator(chunk_size=2000):
        report.entries += 1
        where = f"entry {seal.seq} ({seal.get_kind_display().lower()})"
        if seal.seq != expected:
            report.problems.append(f"entries {expected} to {seal.seq - 1} are missing (deleted)")
        elif seal.prev != prev:
            report.problems.append(f"{where}: it does not follow the entry before it (rewritten)")
        if content_digest(entry_content(seal)) != seal.digest:
            report.problems.append(f"{where}: its content does not have its recorded hash (changed)")
        prev, expected = _link(seal), seal.seq + 1
        if seal.kind != SealKind.DECISION:
            for record_id in (seal.detail or {}).get("record_ids", []):
                removed[record_id] = (seal.kind, seal.seq)
            continue
        if seal.record_id is None or seal.decided_at is None:
            report.problems.append(f"{where}: it names no record (changed)")
            continue
        before = latest.get(seal.record_id)
        if before is not None:
            if removed.get(seal.record_id, ("", 0))[1] > before.seq:
                report.rewritten_by_erasure += 1
            else:
                report.problems.append(
                    f"{where}: record #{seal.record_id} was sealed before, and no run rewrote it"
                )
        latest[seal.record_id] = _Sealed(
            seal.seq, str(seal.request_id), seal.decided_at, seal.decision_digest, seal.salt
        )
    length, head = (state.length, state.head) if state else (0, "")
    if report.entries and (expected - 1, prev) != (length, head):
        report.problems.append(
            f"the chain recorded {length} entries ending in {head[:16]}: the last ones are gone"
        )
    _records_check(team_id, report, latest)
    for record_id, sealed in sorted(latest.items()):
        kind, seq = removed.get(record_id, ("", 0))
        if kind == SealKind.RETENTION and seq > sealed.seq:
            report.deleted_by_retention += 1
        else:
            report.problems.append(
                f"record #{record_id} (sealed at entry {sealed.seq}) was deleted; no run removed it"
            )
    return report


def _records_check(team_id: int, report: SealReport, latest: dict[int, _Sealed]) -> None:
    """Every routed record still there against its latest seal (popped from `latest`)."""
    settled = _since(report.sealed_until)  # the sealer reads from here on: older ones are sealed
    for row in _routed(team_id).order_by("pk").values(*RECORD_FIELDS).iterator(chunk_size=2000):
        sealed = latest.pop(row["pk"], None)
        name = f"record #{row['pk']} (request {row['request_id']})"
        if sealed is None:
            if settled is not None and row["created_at"] < settled:
                report.problems.append(f"{name}: older than the sealed point but not sealed (slipped in)")
            else:
                report.pending += 1
            continue
        if not sealed.salt:
            report.problems.append(f"{name}: its seal's salt was blanked, and no run removed its decision")
        elif (str(row["request_id"]), row["created_at"]) != (sealed.request_id, sealed.decided_at):
            report.problems.append(f"{name}: its request id or time is not the sealed one (changed)")
        elif decision_digest(row, sealed.salt) != sealed.decision_digest:
            report.problems.append(f"{name}: its routing decision is not the one sealed (changed)")
        else:
            report.checked += 1
