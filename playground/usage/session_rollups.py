"""The rollups by session (`models.session_rollups`): written with the records, rebuilt from them.

`session_rollups_add(records)` runs in the records' transaction beside `rollups.rollups_add`:
one upsert per table (both in one round trip on PostgreSQL), sums added and extremes kept (the
largest prompt, the first and last record), so concurrent writers lose nothing.
`session_rollups_rebuild()` recomputes both tables from the raw records with one `INSERT ...
SELECT ... GROUP BY` each, under the same lock and retention horizon as the other rollups'
rebuild. `session_rollups_rekey` renames the sessions an erased end user's id was part of, as
the erasure renames it in the records.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

from django.db import transaction
from django.db.models import Count, F, Max, Min, Q, QuerySet, Sum
from django.db.models.functions import Coalesce, TruncHour

from playground.usage.insights.cache_break_selectors import ANSWERED
from playground.usage.insights.sessions import AFFINITY, GATEWAY_SESSION, session_key, session_key_expression
from playground.usage.models import UsageRecord, UsageSessionHourly, UsageSessionTotal
from playground.usage.rollups import as_e10, cost_e10, hour_start, rollups_after_retention
from playground.usage.statements.rollups import (
    BucketRow,
    records_lock_against_writes,
    rollup_insert_select,
    rollups_upsert,
)

SESSION_ROLLUPS: tuple[type[Any], ...] = (UsageSessionHourly, UsageSessionTotal)
SUMS = UsageSessionHourly.SUMS
# The records the session rollups count: answered, with a prompt, in a session.
COUNTED = Q(status__in=ANSWERED, prompt_tokens__gt=0) & ~Q(
    conversation_id__isnull=True, session="", affinity_key=""
)

type Totals = dict[str, Any]


def _counted(record: UsageRecord) -> str:
    """The record's session key if the session rollups count it, else ""."""
    if record.status not in ANSWERED or record.prompt_tokens <= 0:
        return ""
    return session_key(
        conversation_id=record.conversation_id, session=record.session, affinity_key=record.affinity_key
    )


def session_rollups_add(records: Iterable[UsageRecord]) -> None:
    """Add freshly written records to their sessions' rows (call inside their transaction)."""
    hours: dict[tuple[int, str, dt.datetime], Totals] = {}
    totals: dict[tuple[int, str], Totals] = {}
    for record in records:
        key = _counted(record)
        if not key:
            continue
        hour = hour_start(record.created_at)
        for bucket in (
            hours.setdefault((record.team_id, key, hour), {}),
            totals.setdefault((record.team_id, key), {}),
        ):
            _add(bucket, record)
    hourly: list[BucketRow] = [
        ({"team_id": team, "session_key": key, "bucket": hour}, *_split(sums))
        for (team, key, hour), sums in hours.items()
    ]
    total: list[BucketRow] = [
        ({"team_id": team, "session_key": key}, *_split(sums)) for (team, key), sums in totals.items()
    ]
    # In the order every writer takes, both sent at once (one round trip on PostgreSQL).
    rollups_upsert([(UsageSessionHourly, hourly), (UsageSessionTotal, total)])


def _add(sums: Totals, record: UsageRecord) -> None:
    adds = {
        "requests": 1,
        "prompt_tokens": record.prompt_tokens,
        "cached_tokens": record.cached_tokens or 0,
        "completion_tokens": record.completion_tokens,
        "total_cost_e10": cost_e10(record.total_cost),
    }
    for name, value in adds.items():
        sums[name] = sums.get(name, 0) + value
    at = record.created_at
    sums["peak_prompt_tokens"] = max(sums.get("peak_prompt_tokens", 0), record.prompt_tokens)
    sums["first_at"] = min(sums.get("first_at", at), at)
    sums["last_at"] = max(sums.get("last_at", at), at)


def _split(sums: Totals) -> tuple[dict[str, int], dict[str, tuple[Any, str]]]:
    """(the sums, the extremes with the side each keeps) of a bucket, as the upsert takes them."""
    extremes = {
        "peak_prompt_tokens": (sums["peak_prompt_tokens"], ">"),
        "first_at": (sums["first_at"], "<"),
        "last_at": (sums["last_at"], ">"),
    }
    return {name: sums[name] for name in SUMS}, extremes


def session_rollups_rebuild(*, team_id: int | None = None) -> None:
    """Recompute the session rollups (of one team, or all) from the raw records, in one
    transaction; for a team whose older records retention deleted, only the hours from
    `TeamRetention.records_removed_before` on (the totals are then summed from every hour)."""
    with transaction.atomic():
        records_lock_against_writes()
        kept_records, rebuilt = rollups_after_retention(team_id)
        records = UsageRecord.objects.filter(kept_records, COUNTED)
        hours = UsageSessionHourly.objects.all()
        totals = UsageSessionTotal.objects.all()
        if team_id is not None:
            records, hours, totals = (
                records.filter(team_id=team_id),
                hours.filter(team_id=team_id),
                totals.filter(team_id=team_id),
            )
        hours.filter(rebuilt).delete()
        grouped = (
            records.order_by()
            .annotate(
                r_team_id=F("team_id"),
                r_session_key=session_key_expression(),
                r_bucket=TruncHour("created_at", tzinfo=dt.UTC),
            )
            .values("r_team_id", "r_session_key", "r_bucket")
            .annotate(
                r_requests=Count("id"),
                r_prompt_tokens=Sum("prompt_tokens"),
                r_cached_tokens=Coalesce(Sum("cached_tokens"), 0),
                r_completion_tokens=Sum("completion_tokens"),
                r_total_cost_e10=Coalesce(Sum(as_e10("total_cost")), 0),
                r_peak_prompt_tokens=Max("prompt_tokens"),
                r_first_at=Min("created_at"),
                r_last_at=Max("created_at"),
            )
        )
        rollup_insert_select(UsageSessionHourly, grouped)
        totals.delete()
        rollup_insert_select(UsageSessionTotal, _totals_of(hours))


def _totals_of(hours: QuerySet[UsageSessionHourly]) -> QuerySet[Any]:
    totals: QuerySet[Any] = (
        hours.order_by()
        .annotate(r_team_id=F("team_id"), r_session_key=F("session_key"))
        .values("r_team_id", "r_session_key")
        .annotate(
            **{f"r_{name}": Sum(name) for name in SUMS},
            r_peak_prompt_tokens=Max("peak_prompt_tokens"),
            r_first_at=Min("first_at"),
            r_last_at=Max("last_at"),
        )
    )
    return totals


def session_rollups_rekey(
    *, team_id: int, mentioning: str, rename: Callable[[str, str], str], dry_run: bool
) -> int:
    """Move the team's session rows named after a gateway session or affinity key that holds
    `mentioning` to the name the erasure gave that column in the records (`rename(column,
    value)`); a row whose new key is taken already is summed into it. Returns the rows moved."""
    moved = 0
    for model in SESSION_ROLLUPS:
        named = Q(session_key__startswith=GATEWAY_SESSION) | Q(session_key__startswith=AFFINITY)
        rows = list(
            model.objects.filter(named, team_id=team_id, session_key__contains=mentioning).order_by("pk")
        )
        for row in rows:
            new_key = _renamed(row.session_key, rename)
            if new_key == row.session_key:
                continue
            moved += 1
            if not dry_run:
                _move(model, row, new_key)
    return moved


def _renamed(key: str, rename: Callable[[str, str], str]) -> str:
    if key.startswith(GATEWAY_SESSION):
        return GATEWAY_SESSION + rename("session", key.removeprefix(GATEWAY_SESSION))
    return AFFINITY + rename("affinity_key", key.removeprefix(AFFINITY))


def _move(model: type[Any], row: Any, new_key: str) -> None:
    others = {name: getattr(row, name) for name in model.DIMENSIONS if name != "session_key"}
    into = model.objects.select_for_update().filter(**others, session_key=new_key).first()
    if into is None:
        model.objects.filter(pk=row.pk).update(session_key=new_key)
        return
    for name in SUMS:
        setattr(into, name, getattr(into, name) + getattr(row, name))
    into.peak_prompt_tokens = max(into.peak_prompt_tokens, row.peak_prompt_tokens)
    into.first_at, into.last_at = min(into.first_at, row.first_at), max(into.last_at, row.last_at)
    into.save()
    row.delete()
