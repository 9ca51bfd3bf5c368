"""Retention (issue 37): a team's records lose their text after `body_days`, and are deleted
after `record_days`, their rollups kept, so past months' charts and budgets still add up.

A run (`retention_run`) works in chunks of `RETENTION_CHUNK` records, each chunk one
transaction that also adds what it removed to the run's counts (`TeamRetention`); it takes its
cut-offs when it starts and keeps them until it finishes, so a run killed anywhere continues
where it stopped on the next call, with nothing removed or counted twice. Texts are removed in
(created_at, id) order from the last chunk's position, so a chunk reads only the records it
changes; records are deleted oldest first.

Record deletion cuts at midnight UTC, the rollups' day boundary: every hour and day bucket is
then wholly before the cut (kept, its records gone) or wholly after (its records kept), and a
rebuild of the rollups recomputes only from `records_removed_before` on. A chunk that deletes
sealed routing decisions names them in the team's seal chain in its transaction
(`usage.routing_seals`), so the verifier counts them as removed by retention, not tampered with.

Conversation messages and batch items are left alone: they are the features' own documents,
which people read and delete themselves (docs/guide/data-governance.md).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from playground.usage.models import (
    BodyRemoved,
    Score,
    SealKind,
    TeamRetention,
    UsageCacheBreak,
    UsageRecord,
)
from playground.usage.reclaim import reclaim_freed_space
from playground.usage.routing_seals import seals_account_removed

# The text a record may hold: what `usage.storage.record_text_kept` decides about.
HAS_TEXT = (
    Q(request_body__isnull=False)
    | Q(variables__isnull=False)
    | Q(schema_errors__isnull=False)
    | ~Q(error_text="")
)
TEXT_REMOVED = {"request_body": None, "variables": None, "schema_errors": None, "error_text": ""}


@dataclass(frozen=True)
class RetentionOutcome:
    finished: bool
    bodies_removed: int  # by this call (the run's counts are on TeamRetention)
    records_removed: int


def retention_teams_due() -> list[int]:
    """The teams with a retention set or a run left unfinished."""
    rows = TeamRetention.objects.filter(
        Q(body_days__isnull=False)
        | Q(record_days__isnull=False)
        | Q(run_started_at__isnull=False, run_finished_at__isnull=True)
    )
    return list(rows.order_by("pk").values_list("pk", flat=True))


def retention_run(
    *, team_id: int, deadline: float | None = None, chunk: int | None = None
) -> RetentionOutcome:
    """Start the team's run (or continue the unfinished one) and work until it is finished or
    `time.monotonic()` passes `deadline`. The caller reclaims the freed space
    (`retention_sweep` does, once for all teams)."""
    chunk = chunk or settings.RETENTION_CHUNK
    state = _run_started(team_id)
    if state is None:
        return RetentionOutcome(finished=True, bodies_removed=0, records_removed=0)
    records = bodies = 0
    if state.run_record_cutoff is not None:
        while True:
            if _past(deadline):
                return RetentionOutcome(finished=False, bodies_removed=bodies, records_removed=records)
            removed = _records_delete_chunk(state, chunk)
            records += removed
            if removed < chunk:
                break
    if state.run_body_cutoff is not None:
        while True:
            if _past(deadline):
                return RetentionOutcome(finished=False, bodies_removed=bodies, records_removed=records)
            changed, more = _bodies_remove_chunk(state, chunk)
            bodies += changed
            if not more:
                break
    _run_finish(state)
    return RetentionOutcome(finished=True, bodies_removed=bodies, records_removed=records)


def retention_sweep(*, deadline: float | None = None) -> bool:
    """Every due team's run, then the freed space reclaimed; False if the deadline left a run
    unfinished (the caller continues it)."""
    finished = True
    removed = False
    for team_id in retention_teams_due():
        outcome = retention_run(team_id=team_id, deadline=deadline)
        finished = finished and outcome.finished
        removed = removed or bool(outcome.bodies_removed or outcome.records_removed)
    if removed:
        # A deleted record takes its scores (and their comments) and its cache break with it.
        reclaim_freed_space([UsageRecord, Score, UsageCacheBreak])
    return finished


def retention_next_run(now: dt.datetime | None = None) -> dt.datetime:
    """When the beat schedule (`CELERY_BEAT_SCHEDULE`) runs the sweep next: daily at
    `RETENTION_AT_UTC`."""
    now = now or timezone.now()
    hour, minute = settings.RETENTION_AT_UTC
    today = now.astimezone(dt.UTC).replace(hour=hour, minute=minute, second=0, microsecond=0)
    return today if today > now else today + dt.timedelta(days=1)


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _run_started(team_id: int) -> TeamRetention | None:
    """The team's run in progress, started now (cut-offs taken) unless one was left unfinished;
    None when the team keeps everything and no run is unfinished."""
    with transaction.atomic():
        state = TeamRetention.objects.select_for_update().filter(pk=team_id).first()
        if state is None or state.running:
            return state
        if state.body_days is None and state.record_days is None:
            return None
        now = timezone.now()
        previous_body_cutoff = state.run_body_cutoff if state.run_finished_at else None
        state.run_started_at, state.run_finished_at = now, None
        state.run_body_cutoff = (
            now - dt.timedelta(days=state.body_days) if state.body_days is not None else None
        )
        state.run_record_cutoff = (
            _midnight_utc(now - dt.timedelta(days=state.record_days))
            if state.record_days is not None
            else None
        )
        # Everything before the last finished run's cut-off lost its text in that run.
        state.run_body_position_at = (
            previous_body_cutoff
            if previous_body_cutoff
            and state.run_body_cutoff
            and previous_body_cutoff <= state.run_body_cutoff
            else None
        )
        state.run_body_position_id = 0
        state.run_bodies_removed = state.run_records_removed = 0
        state.save()
        return state


def _midnight_utc(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _records_delete_chunk(state: TeamRetention, chunk: int) -> int:
    """Delete up to `chunk` of the oldest records before the cut-off (what points at them lets
    go, as each model says), adding them to the run's count in the same transaction."""
    with transaction.atomic():
        ids = list(
            UsageRecord.objects.filter(team_id=state.pk, created_at__lt=state.run_record_cutoff)
            .order_by("created_at", "id")
            .values_list("pk", flat=True)[:chunk]
        )
        if not ids:
            return 0
        routed = UsageRecord.objects.filter(pk__in=ids, routing__isnull=False).values_list("pk", flat=True)
        seals_account_removed(team_id=state.pk, record_ids=list(routed), kind=SealKind.RETENTION)
        _total, by_model = UsageRecord.objects.filter(pk__in=ids).delete()
        removed = by_model.get(UsageRecord._meta.label, 0)
        TeamRetention.objects.filter(pk=state.pk).update(
            run_records_removed=F("run_records_removed") + removed
        )
    return len(ids)


def _bodies_remove_chunk(state: TeamRetention, chunk: int) -> tuple[int, bool]:
    """Remove the text of the next `chunk` records before the cut-off, from the run's position
    on; (how many had text to remove, whether records are left)."""
    with transaction.atomic():
        rows = UsageRecord.objects.filter(team_id=state.pk, created_at__lt=state.run_body_cutoff)
        if state.run_body_position_at is not None:
            at, pk = state.run_body_position_at, state.run_body_position_id
            rows = rows.filter(Q(created_at__gt=at) | Q(created_at=at, id__gt=pk))
        page = list(rows.order_by("created_at", "id").values_list("created_at", "pk")[:chunk])
        if not page:
            return 0, False
        changed = UsageRecord.objects.filter(
            HAS_TEXT, pk__in=[pk for _at, pk in page], body_removed_by=""
        ).update(**TEXT_REMOVED, body_removed_by=BodyRemoved.RETENTION, body_removed_at=timezone.now())
        state.run_body_position_at, state.run_body_position_id = page[-1]
        TeamRetention.objects.filter(pk=state.pk).update(
            run_bodies_removed=F("run_bodies_removed") + changed,
            run_body_position_at=state.run_body_position_at,
            run_body_position_id=state.run_body_position_id,
        )
    return changed, len(page) == chunk


def _run_finish(state: TeamRetention) -> None:
    with transaction.atomic():
        locked = TeamRetention.objects.select_for_update().get(pk=state.pk)
        cutoff = locked.run_record_cutoff
        if cutoff is not None and (
            locked.records_removed_before is None or cutoff > locked.records_removed_before
        ):
            locked.records_removed_before = cutoff
        locked.run_finished_at = timezone.now()
        locked.save()
