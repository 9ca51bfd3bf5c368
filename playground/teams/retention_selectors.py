"""Reads of the Data page's retention panel: the team's retention, the next run and the last."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from playground.accounts.models import Team
from playground.usage.models import TeamRetention
from playground.usage.retention import retention_next_run


@dataclass(frozen=True)
class RetentionPanel:
    body_days: int | None  # None: kept for good
    record_days: int | None
    next_run: dt.datetime | None  # None when nothing is set and no run is left to finish
    running: bool  # a run started and not finished (it continues at the next run)
    last_started: dt.datetime | None
    last_finished: dt.datetime | None
    bodies_removed: int  # by the last (or the running) run
    records_removed: int


def retention_panel(*, team: Team) -> RetentionPanel:
    state = TeamRetention.objects.filter(pk=team.pk).first() or TeamRetention(team=team)
    active = state.body_days is not None or state.record_days is not None or state.running
    return RetentionPanel(
        body_days=state.body_days,
        record_days=state.record_days,
        next_run=retention_next_run() if active else None,
        running=state.running,
        last_started=state.run_started_at,
        last_finished=state.run_finished_at,
        bodies_removed=state.run_bodies_removed,
        records_removed=state.run_records_removed,
    )
