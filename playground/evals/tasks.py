"""Celery tasks: an experiment target's answers scored in the worker, never in a web request.

`experiment_target_score` runs after every step of a target's batch (the step's
`task_postrun`, connected in `EvalsConfig.ready`), so an answer's verdicts are stored soon
after it arrives; it calls itself again while judge rows wait, a round of calls at a time.
"""

from __future__ import annotations

import math
from typing import Any

from celery import Task, shared_task
from django.conf import settings

from playground.evals.models import ExperimentTarget
from playground.evals.services.scoring import target_score

SCORE_TIME_LIMIT = math.ceil(settings.UPSTREAM_TOTAL_TIMEOUT + 120)


@shared_task(acks_late=True, time_limit=SCORE_TIME_LIMIT, soft_time_limit=SCORE_TIME_LIMIT - 30)
def experiment_target_score(target_id: int) -> None:
    if target_score(target_id=target_id):
        experiment_target_score.delay(target_id)


def after_batch_step(sender: Task[Any, Any] | None = None, args: tuple[Any, ...] = (), **_: Any) -> None:
    """A batch step ended: if the batch is an experiment's target, score what it answered."""
    if not args:
        return
    for target_id in ExperimentTarget.objects.filter(batch_id=args[0]).values_list("pk", flat=True):
        experiment_target_score.delay(target_id)
