"""The chain of steps that runs a batch: who owns it (token, lease, heartbeat), and taking over a stalled one.

A batch is driven by one chain of Celery steps (`tasks.batch_step`). Each step holds the
batch's lease while it works, identified by `chain_token`, and says when the next step is
due. A step is short (a submission, a round of polls, or a time slice of concurrent
requests), never sleeps, and leaves everything it learnt in the database, so a worker killed
at any point loses nothing: the next step (or a watcher that takes the chain over once the
lease and the due step have lapsed) picks up from the item states. See docs/architecture.md
for the states and who moves them.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from playground.batches.models import Batch, BatchItem, BatchStatus, ItemState

logger = logging.getLogger(__name__)


OPEN_STATES = (ItemState.PENDING, ItemState.SUBMITTED)
# How long after a held lease lapses the chain's owner tries again.
LEASE_WAIT_MARGIN_SECONDS = 0.5


def start_chain(batch: Batch) -> str:
    """A new chain owns the batch from now on (any older chain's steps find a stale token and stop)."""
    token = uuid.uuid4().hex
    now = timezone.now()
    Batch.objects.filter(pk=batch.pk).update(chain_token=token, next_step_at=now, heartbeat_at=now)
    batch_id = batch.pk
    transaction.on_commit(lambda: _enqueue_step(batch_id, token, 0))
    return token


def _enqueue_step(batch_id: int, token: str, countdown: float) -> None:
    from playground.batches.tasks import batch_step  # tasks import services, not the other way at load

    batch_step.apply_async((batch_id, token), countdown=countdown)


def _lease() -> dt.timedelta:
    return dt.timedelta(seconds=settings.BATCH_LEASE_SECONDS)


def lease_acquire(batch_id: int, token: str) -> bool:
    now = timezone.now()
    return (
        Batch.objects.filter(pk=batch_id, chain_token=token, finished_at__isnull=True)
        .exclude(status=BatchStatus.DRAFT)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(lease_until=now + _lease(), heartbeat_at=now)
        == 1
    )


def lease_wait_seconds(batch_id: int, token: str) -> float | None:
    """When `token` owns the unfinished batch but a replaced chain's step still holds the lease
    (a retry pressed while a step ran): the seconds until that lease lapses, else None.

    The owner's step comes back then instead of ending, so the batch never waits for a watcher.
    """
    held_until = (
        Batch.objects.filter(
            pk=batch_id, chain_token=token, finished_at__isnull=True, lease_until__isnull=False
        )
        .exclude(status=BatchStatus.DRAFT)
        .values_list("lease_until", flat=True)
        .first()
    )
    if held_until is None:
        return None
    return max((held_until - timezone.now()).total_seconds(), 0.0) + LEASE_WAIT_MARGIN_SECONDS


def lease_renew(batch_id: int, token: str) -> bool:
    now = timezone.now()
    return (
        Batch.objects.filter(pk=batch_id, chain_token=token).update(
            lease_until=now + _lease(), heartbeat_at=now
        )
        == 1
    )


def lease_release(batch_id: int, token: str, countdown: float | None) -> None:
    now = timezone.now()
    next_at = None if countdown is None else now + dt.timedelta(seconds=countdown)
    Batch.objects.filter(pk=batch_id, chain_token=token).update(
        lease_until=None, heartbeat_at=now, next_step_at=next_at
    )


def batch_watch(*, batch_id: int, seen: str) -> float | None:
    """A watchdog: if the batch's chain shows no sign of life (no heartbeat since `seen`, the
    lease lapsed and the due step is overdue by the grace period), a new chain takes over.

    Returns the seconds until it should look again, or None (alive, finished, or taken over).
    """
    batch = (
        Batch.objects.filter(pk=batch_id, finished_at__isnull=True).exclude(status=BatchStatus.DRAFT).first()
    )
    if batch is None or (batch.heartbeat_at and batch.heartbeat_at.isoformat() != seen):
        return None
    now = timezone.now()
    due = _stalled_after(batch)
    if now < due:
        return (due - now).total_seconds() + 0.5
    with transaction.atomic():
        start_chain(batch)
    logger.warning("batch %s: its chain stalled; a new one took over", batch_id)
    return None


def batch_nudge_if_stalled(*, batch: Batch) -> bool:
    """Take the chain over when it has visibly stalled (the detail page asks while it is watched)."""
    if batch.finished_at is not None or batch.status == BatchStatus.DRAFT:
        return False
    if timezone.now() < _stalled_after(batch):
        return False
    with transaction.atomic():
        start_chain(batch)
    return True


def _stalled_after(batch: Batch) -> dt.datetime:
    grace = dt.timedelta(seconds=settings.BATCH_STALL_GRACE_SECONDS)
    marks = [mark for mark in (batch.lease_until, batch.next_step_at, batch.heartbeat_at) if mark is not None]
    return (max(marks) if marks else timezone.now()) + grace


def batches_unfinished() -> list[tuple[int, str]]:
    """(id, heartbeat) of every batch still running: what a starting worker watches."""
    rows = Batch.objects.filter(finished_at__isnull=True).exclude(status=BatchStatus.DRAFT)
    return [(pk, beat.isoformat() if beat else "") for pk, beat in rows.values_list("pk", "heartbeat_at")]


def finish_if_complete(batch_id: int) -> bool:
    if BatchItem.objects.filter(batch_id=batch_id, state__in=OPEN_STATES).exists():
        return False
    now = timezone.now()
    Batch.objects.filter(pk=batch_id, finished_at__isnull=True).update(finished_at=now)
    Batch.objects.filter(pk=batch_id, status=BatchStatus.RUNNING).update(status=BatchStatus.DONE)
    return True


def fail_open_items(batch: Batch, reason: str, *, code: str, items: Any = None) -> int:
    queryset = items if items is not None else batch.items.filter(state__in=OPEN_STATES)
    return queryset.update(
        state=ItemState.FAILED, error=reason, error_code=code[:40], finished_at=timezone.now()
    )
