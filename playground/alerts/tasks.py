"""Celery tasks of the alerts: each delivery tried and retried with backoff; the rules evaluated
once a minute by beat (settings.CELERY_BEAT_SCHEDULE)."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from playground.alerts.delivery import delivery_attempt
from playground.alerts.evaluation import alerts_evaluate


# One attempt has a 15 s deadline (delivery.TIMEOUTS); the limits only stop a stuck worker.
@shared_task(time_limit=60, soft_time_limit=45)
def alert_deliver(delivery_id: int) -> None:
    retry_in = delivery_attempt(delivery_id)
    if retry_in is not None:
        alert_deliver.apply_async((delivery_id,), countdown=retry_in)


@shared_task(time_limit=120, soft_time_limit=100)
def alerts_evaluate_all() -> None:
    alerts_evaluate(now=timezone.now())
