"""Erasure of one end user (issue 37): every body and every attribution of the end user a team's
gateway requests named, gone from the team's records, rollups and what its features keep,
while costs and token counts stay where they were counted.

An end user is who a request says it is for: the `x-playground-user` header
(`UsageRecord.end_user`) or the OpenAI `user` field of the body as sent. Such a request's
record loses its text (body, prompt variables, error text, schema errors: kept as `metadata`)
and its end user becomes a *tombstone*: a keyed digest of the team and the id
(`erased:<16 hex>`), the same for every record of that end user, so its costs stay grouped on
the dashboard but the id is gone and cannot be computed back without the server's secret.
The end-user rollups are re-keyed the same way (a bucket already holding the tombstone takes
the sums), and so are the session rollups named after the id (its gateway session or
affinity key, renamed in the records). Wherever else the id is written in the team's kept
text (another record's body,
session, tags, metadata or routing; a chat message; a batch item), it is replaced by the
tombstone (a sealed routing decision so rewritten is accounted for in the team's seal chain and
sealed again: `usage.routing_seals`); an id shorter than `MENTION_MIN` characters is replaced
only where a whole value is the id, so erasing "42" does not rewrite every number in the team's
text.

What the features keep is theirs: each registers an `EndUserEraser` in `erasers` from its
`AppConfig.ready()` (chat its messages, batches their items, the gateway its idempotency
store, evaluations their dataset items and checks' reasons), and `end_user_erase` runs them in
the same transaction as the records. The caller
(`teams.services.erasure`) checks the role, writes the audit entry and reclaims the freed space.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings
from django.db import models, transaction
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Cast

from playground.accounts.models import StoreMode
from playground.lib.registry import Registry
from playground.usage.models import SealKind, UsageEndUserDaily, UsageEndUserHourly, UsageRecord
from playground.usage.rollups import MEASURES_OF
from playground.usage.routing_seals import routing_seals_of, seals_account_removed, seals_renew
from playground.usage.session_rollups import SESSION_ROLLUPS, session_rollups_rekey

MENTION_MIN = 6  # shorter ids are replaced only where a whole value is the id
END_USER_MAX = 1024  # UsageRecord.end_user, the x-playground-user header's cap
CHUNK = 500
ERASED = "end_user_erased"  # the count an erased record keeps in `redactions`


@dataclass(frozen=True)
class Needle:
    """The end user's id in a team's text, and the tombstone that replaces it."""

    value: str
    tombstone: str

    @property
    def whole_only(self) -> bool:
        """Replace only values that are the id, not text that contains it (`MENTION_MIN`)."""
        return len(self.value) < MENTION_MIN or self.value in self.tombstone

    def in_text(self, column: str) -> Q:
        """Rows whose text column holds the id (exactly, for a short id)."""
        if self.whole_only:
            return Q(**{column: self.value})
        return Q(**{f"{column}__contains": self.value})

    def in_json(self, column: str) -> Q:
        """Rows whose JSON column may hold the id, read as text: a superset that `replaced` decides.
        Both escapings: SQLite keeps Django's ASCII-escaped JSON, PostgreSQL's jsonb prints UTF-8."""
        found = Q()
        for ascii_only in (True, False):
            quoted = json.dumps(self.value, ensure_ascii=ascii_only)
            found |= Q(**{f"{column}_as_text__contains": quoted if self.whole_only else quoted[1:-1]})
        return found

    def found_in(self, text: str) -> bool:
        return text == self.value if self.whole_only else self.value in text

    def replaced(self, value: Any) -> Any:
        """`value` (text or JSON) with the id replaced in every string and key."""
        if isinstance(value, str):
            if self.whole_only:
                return self.tombstone if value == self.value else value
            return value.replace(self.value, self.tombstone)
        if isinstance(value, list):
            return [self.replaced(item) for item in value]
        if isinstance(value, dict):
            return {self.replaced(key): self.replaced(item) for key, item in value.items()}
        return value


def end_user_needle(*, team_id: int, end_user: str) -> Needle:
    return Needle(end_user, f"erased:{end_user_digest(team_id=team_id, end_user=end_user)}")


def end_user_digest(*, team_id: int, end_user: str) -> str:
    """16 hex of an HMAC of the team and the id under the server's secret: the tombstone's and the
    audit log's name for the end user, which nobody without the secret can match to a guess."""
    message = f"end-user:{team_id}:{end_user}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()[:16]


@dataclass(frozen=True)
class Columns:
    """The columns of a table that may hold an end user's id."""

    text: tuple[str, ...] = ()
    json: tuple[str, ...] = ()


def rows_scrubbed(rows: QuerySet[Any], columns: Columns, needle: Needle, *, dry_run: bool) -> int:
    """How many of `rows` hold the id in `columns`; unless `dry_run`, the id replaced there."""
    changed = 0
    for batch in _chunks(_candidates(rows, columns, needle, Q()), CHUNK):
        kept = [row for row in batch if _scrub(row, columns, needle)]
        changed += len(kept)
        if kept and not dry_run:
            type(kept[0]).objects.bulk_update(kept, [*columns.text, *columns.json])
    return changed


@dataclass(frozen=True)
class Erasure:
    """One run, as the features' erasers see it: the team, the id, the records found attributed
    to it (and their request ids, which a replay store keys its answers by), and whether it only
    counts (`dry_run`)."""

    team_id: int
    needle: Needle
    record_ids: frozenset[int]
    request_ids: frozenset[str]
    dry_run: bool

    def scrubbed(self, rows: QuerySet[Any], columns: Columns) -> int:
        return rows_scrubbed(rows, columns, self.needle, dry_run=self.dry_run)


class EndUserEraser(Protocol):
    """What a feature keeps of an end user: counted or erased (in the caller's transaction), by
    kind of thing. `tables` are the models it may change, whose freed space is reclaimed after."""

    @property
    def tables(self) -> tuple[type[models.Model], ...]: ...

    def erase(self, run: Erasure) -> dict[str, int]: ...


erasers: Registry[EndUserEraser] = Registry("end-user eraser")
ERASER_KINDS = ("chat", "batches", "gateway", "evals")


def erased_tables() -> list[type[models.Model]]:
    """Every table an erasure may change: the records, the end-user rollups, the features' own."""
    found = [erasers.get(kind) for kind in ERASER_KINDS]
    return [
        UsageRecord,
        UsageEndUserHourly,
        UsageEndUserDaily,
        *SESSION_ROLLUPS,
        *(t for e in found if e for t in e.tables),
    ]


RECORD_COLUMNS = Columns(
    text=("end_user", "session", "affinity_key", "error_text"),
    json=("request_body", "variables", "schema_errors", "metadata", "routing"),
)


def end_user_erase(*, team_id: int, end_user: str, dry_run: bool = False) -> dict[str, int]:
    """Counts of what held the end user in the team (`dry_run`: what would be erased), erased
    unless `dry_run`, all in one transaction. A second run counts 0 everywhere."""
    if not end_user or len(end_user) > END_USER_MAX:
        raise ValueError(f"An end user's id is 1 to {END_USER_MAX} characters.")
    needle = end_user_needle(team_id=team_id, end_user=end_user)
    with transaction.atomic():
        counts, record_ids, request_ids = _records_erase(team_id=team_id, needle=needle, dry_run=dry_run)
        counts["rollup_rows"] = _rollups_rekey(team_id=team_id, needle=needle, dry_run=dry_run)
        counts["rollup_rows"] += session_rollups_rekey(
            team_id=team_id, mentioning=needle.value, rename=_column_renamed(needle), dry_run=dry_run
        )
        run = Erasure(team_id, needle, record_ids, request_ids, dry_run)
        for kind in ERASER_KINDS:
            eraser = erasers.get(kind)
            if eraser is not None:
                counts |= eraser.erase(run)
    return counts


def _records_erase(
    *, team_id: int, needle: Needle, dry_run: bool
) -> tuple[dict[str, int], frozenset[int], frozenset[str]]:
    named = Q(end_user=needle.value) | Q(request_body__user=needle.value)
    rows = UsageRecord.objects.filter(team_id=team_id)
    candidates = _candidates(rows, RECORD_COLUMNS, needle, named | _in_tags(needle))
    fields = [*RECORD_COLUMNS.text, *RECORD_COLUMNS.json, "tags", "store_mode", "redactions"]
    ids: set[int] = set()
    request_ids: set[str] = set()
    rerouted: set[int] = set()  # records whose routing decision the scrub rewrote
    mentioned = 0
    for batch in _chunks(candidates.only("request_id", *fields), CHUNK):
        changed = []
        for record in batch:
            attributed = _is_attributed(record, needle)  # before the scrub renames its end user
            if attributed:
                _text_drop(record)
                ids.add(record.pk)
                request_ids.add(str(record.request_id))
            routing = record.routing
            if _record_scrub(record, needle) or attributed:
                mentioned += not attributed
                changed.append(record)
            if record.routing != routing:
                rerouted.add(record.pk)
        if changed and not dry_run:
            UsageRecord.objects.bulk_update(changed, fields)
    counts = {
        "records": len(ids),
        "records_mentioning": mentioned,
        "routing_seals": _seals_renewed(team_id, rerouted, dry_run=dry_run),
    }
    return counts, frozenset(ids), frozenset(request_ids)


def _seals_renewed(team_id: int, record_ids: set[int], *, dry_run: bool) -> int:
    """The sealed routing decisions the erasure rewrote (`usage.routing_seals`): named in an
    erasure entry of the team's seal chain, their old digests made unmatchable, sealed again."""
    if dry_run:
        return routing_seals_of(team_id=team_id, record_ids=record_ids)
    named = seals_account_removed(team_id=team_id, record_ids=record_ids, kind=SealKind.ERASURE)
    seals_renew(team_id=team_id, record_ids=record_ids)
    return named


def _is_attributed(record: UsageRecord, needle: Needle) -> bool:
    body = record.request_body
    return record.end_user == needle.value or (isinstance(body, dict) and body.get("user") == needle.value)


def _text_drop(record: UsageRecord) -> None:
    """The record keeps no text, as a `metadata` record, and says its end user was erased."""
    record.request_body = None
    record.variables = None
    record.error_text = ""
    record.schema_errors = None
    record.store_mode = StoreMode.METADATA
    record.redactions = {**(record.redactions or {}), ERASED: 1}


def _record_scrub(record: UsageRecord, needle: Needle) -> bool:
    changed = _scrub(record, RECORD_COLUMNS, needle)
    tags = [needle.replaced(tag) if needle.whole_only else tag for tag in record.tags.split(",")]
    joined = ",".join(tags) if needle.whole_only else record.tags.replace(needle.value, needle.tombstone)
    if joined != record.tags:
        record.tags = joined[: UsageRecord._meta.get_field("tags").max_length]
        changed = True
    return changed


def _in_tags(needle: Needle) -> Q:
    """Tags are stored as ",a,b,": a short id must be a whole tag."""
    return Q(tags__contains=f",{needle.value}," if needle.whole_only else needle.value)


def _rollups_rekey(*, team_id: int, needle: Needle, dry_run: bool) -> int:
    """The end user's buckets renamed to the tombstone; where the tombstone already has that
    bucket (an end user erased before and seen again), its sums take the row's and the row goes."""
    rekeyed = 0
    for model in (UsageEndUserHourly, UsageEndUserDaily):
        rows = list(model.objects.filter(team_id=team_id, end_user=needle.value))
        rekeyed += len(rows)
        if dry_run:
            continue
        measures = MEASURES_OF[model]
        for row in rows:
            same = {"team_id": team_id, "bucket": row.bucket, "api_key_id": row.api_key_id, "path": row.path}
            into = model.objects.filter(**same, end_user=needle.tombstone)
            if into.update(**{name: F(name) + getattr(row, name) for name in measures}):
                row.delete()
            else:
                model.objects.filter(pk=row.pk).update(end_user=needle.tombstone)
    return rekeyed


def _column_renamed(needle: Needle) -> Callable[[str, str], str]:
    """What the scrub makes of a record's text column's value (`_scrub`), for the session rollups."""

    def renamed(column: str, value: str) -> str:
        new: str = needle.replaced(value)
        return new[: getattr(UsageRecord._meta.get_field(column), "max_length", None)]

    return renamed


def _candidates(rows: QuerySet[Any], columns: Columns, needle: Needle, also: Q) -> QuerySet[Any]:
    found = also
    for column in columns.text:
        found |= needle.in_text(column)
    for column in columns.json:
        found |= needle.in_json(column)
    annotated = rows.annotate(
        **{f"{column}_as_text": Cast(column, models.TextField()) for column in columns.json}
    )
    found_rows: QuerySet[Any] = annotated.filter(found).order_by("pk")
    return found_rows


def _scrub(row: models.Model, columns: Columns, needle: Needle) -> bool:
    changed = False
    for column in (*columns.text, *columns.json):
        value = getattr(row, column)
        new = needle.replaced(value)
        if column in columns.text:
            new = new[: getattr(row._meta.get_field(column), "max_length", None)]
        if new != value:
            setattr(row, column, new)
            changed = True
    return changed


def _chunks(rows: QuerySet[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for row in rows.iterator(chunk_size=size):
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
