"""Celery tasks of the usage floor: they take ids, call a service, and are enqueued on commit."""

from __future__ import annotations

import time

from celery import shared_task

from playground.usage.budgets.alerts import budget_alert_email_send
from playground.usage.retention import retention_sweep as retention_sweep_run
from playground.usage.routing_seals import routing_seal_sweep


# The mail backend's own timeout is 10 s (settings.MAILERS); the limits only stop a server that
# keeps the connection open without answering.
@shared_task(time_limit=60, soft_time_limit=45)
def budget_alert_email(alert_id: int) -> None:
    budget_alert_email_send(alert_id=alert_id)


# Each call works for at most this long, then hands the rest to a fresh task: a run stays well
# inside the task's time limit, and a backlog drains in steps that each commit what they did.
RETENTION_STEP_SECONDS = 300


@shared_task(time_limit=RETENTION_STEP_SECONDS + 300, soft_time_limit=RETENTION_STEP_SECONDS + 240)
def retention_sweep() -> None:
    """The beat's daily retention run (settings.CELERY_BEAT_SCHEDULE), continued by itself while
    a team's run is left unfinished; a killed one is continued by the next call."""
    if not retention_sweep_run(deadline=time.monotonic() + RETENTION_STEP_SECONDS):
        retention_sweep.delay()


# The beat runs the sealer every minute; one call works this long at most and leaves the rest
# (a first run over a long history) to the next minute's.
ROUTING_SEAL_STEP_SECONDS = 45


@shared_task(time_limit=ROUTING_SEAL_STEP_SECONDS + 60, soft_time_limit=ROUTING_SEAL_STEP_SECONDS + 30)
def routing_decisions_seal() -> int:
    """Seal the routed records of the last minute in their teams' chains (`usage.routing_seals`):
    after the requests, never in them. Two at once take turns on each team's chain."""
    sealed, _finished = routing_seal_sweep(deadline=time.monotonic() + ROUTING_SEAL_STEP_SECONDS)
    return sealed
