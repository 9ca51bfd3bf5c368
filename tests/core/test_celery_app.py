"""The Celery app is configured from Django settings, durably (no task lost to a dying worker)."""

from __future__ import annotations

from typing import Any

from playground.celery import app


def test_it_takes_its_broker_from_the_settings(settings: Any) -> None:
    assert app.conf.broker_url == settings.CELERY_BROKER_URL


def test_it_acknowledges_tasks_only_after_running_them() -> None:
    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.task_time_limit > app.conf.task_soft_time_limit > 0
