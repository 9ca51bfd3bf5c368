"""Celery tasks of the usage floor: they take ids, call a service, and are enqueued on commit."""

from __future__ import annotations

from celery import shared_task

from playground.usage.budgets.alerts import budget_alert_email_send


# The mail backend's own timeout is 10 s (settings.MAILERS); the limits only stop a server that
# keeps the connection open without answering.
@shared_task(time_limit=60, soft_time_limit=45)
def budget_alert_email(alert_id: int) -> None:
    budget_alert_email_send(alert_id=alert_id)
