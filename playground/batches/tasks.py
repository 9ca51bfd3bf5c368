"""Celery tasks: they take ids, call a service, and schedule the next step by countdown.

`batch_step` is the chain that runs a batch; nothing here sleeps. `batch_watch` is the
watchdog that lets a new chain take over a batch whose chain died with its worker (the
embedded filesystem broker deletes a message once it is fetched, and Redis gives an
unacknowledged one back only after its visibility timeout), and every worker starts one
per unfinished batch when it comes up.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings

from playground.batches.services import chain, step

logger = logging.getLogger(__name__)

# Whole seconds, as Celery's typed options take them: rounded up, a step is never cut shorter.
STEP_TIME_LIMIT = math.ceil(settings.BATCH_STEP_SECONDS + settings.UPSTREAM_TOTAL_TIMEOUT + 120)


@shared_task(
    acks_late=True,
    reject_on_worker_lost=True,
    time_limit=STEP_TIME_LIMIT,
    soft_time_limit=STEP_TIME_LIMIT - 30,
)
def batch_step(batch_id: int, token: str) -> None:
    countdown = step.batch_step_run(batch_id=batch_id, token=token)
    if countdown is not None:
        batch_step.apply_async((batch_id, token), countdown=countdown)


@shared_task(acks_late=True, reject_on_worker_lost=True, time_limit=60, soft_time_limit=50)
def batch_watch(batch_id: int, seen: str) -> None:
    countdown = chain.batch_watch(batch_id=batch_id, seen=seen)
    if countdown is not None:
        batch_watch.apply_async((batch_id, seen), countdown=countdown)


@shared_task(acks_late=True, time_limit=60, soft_time_limit=50)
def batches_resume() -> None:
    for batch_id, seen in chain.batches_unfinished():
        batch_watch.delay(batch_id, seen)


@worker_ready.connect
def _resume_on_worker_start(**_: Any) -> None:
    batches_resume.delay()
