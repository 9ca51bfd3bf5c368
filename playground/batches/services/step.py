"""One step of a batch's chain: take the lease, run the path's step, release it with the next step's time."""

from __future__ import annotations

import logging

from django.conf import settings

from playground.batches.models import Batch, BatchPath
from playground.batches.services.chain import (
    fail_open_items,
    finish_if_complete,
    lease_acquire,
    lease_release,
    lease_wait_seconds,
)
from playground.batches.services.concurrent_path import concurrent_step
from playground.batches.services.queue_path import queue_step
from playground.lib.asyncutil import run_on_one_loop

logger = logging.getLogger(__name__)


def batch_step_run(*, batch_id: int, token: str) -> float | None:
    """Run one step if this chain owns the batch; the seconds until the next step, or None (no more)."""
    if not lease_acquire(batch_id, token):
        return lease_wait_seconds(batch_id, token)
    countdown: float | None
    try:
        batch = Batch.objects.select_related("connection").get(pk=batch_id)
        if batch.connection is None:
            fail_open_items(batch, "The batch's connection was deleted.", code="no_connection")
            countdown = None
        elif batch.path == BatchPath.QUEUE:
            countdown = run_on_one_loop(queue_step, batch, token)
        else:
            countdown = run_on_one_loop(concurrent_step, batch, token)
        if finish_if_complete(batch_id):
            countdown = None
    except Exception:
        logger.exception(
            "batch %s: a step failed; the next one runs in %s s", batch_id, settings.BATCH_STEP_RETRY_SECONDS
        )
        countdown = settings.BATCH_STEP_RETRY_SECONDS
    lease_release(batch_id, token, countdown)
    return countdown
