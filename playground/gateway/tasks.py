"""Celery tasks of the gateway: the beat's sweep of idempotent answers past their window."""

from __future__ import annotations

from celery import shared_task

from playground.gateway.idempotency import idempotency_expire


@shared_task(time_limit=120, soft_time_limit=100)
def idempotency_answers_expire() -> int:
    """Every few minutes (settings.CELERY_BEAT_SCHEDULE): nothing of an answer outlives its window."""
    return idempotency_expire()
