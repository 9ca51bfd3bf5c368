"""A team's retention (issue 37): how long its records keep their text, and the records
themselves; and the state of its retention runs (`usage.retention`)."""

from __future__ import annotations

from django.db import models

from playground.accounts.models import Team


class BodyRemoved(models.TextChoices):
    """Why a usage record no longer holds its text (`UsageRecord.body_removed_by`); an end user's
    erasure says so in the record's `redactions` instead (`usage.erasure`)."""

    RETENTION = "retention", "The team's retention"


class TeamRetention(models.Model):
    """One row per team that set a retention or had a run. Days `None`: kept for good.

    A run takes its cut-offs when it starts and keeps them here until it has finished, so a run
    that was killed continues with the same cut-offs; its counts grow in the transaction of each
    chunk it removes, so nothing is counted (or removed) twice.
    """

    team = models.OneToOneField(Team, on_delete=models.CASCADE, primary_key=True, related_name="retention")
    body_days = models.PositiveIntegerField(null=True, blank=True)
    record_days = models.PositiveIntegerField(null=True, blank=True)
    # Records created before this were deleted by retention: their rollups are kept, and a
    # rebuild of the rollups recomputes only from here on (`usage.rollups.rollups_rebuild`).
    records_removed_before = models.DateTimeField(null=True, blank=True)
    # The run in progress (started, not finished) or the last one.
    run_started_at = models.DateTimeField(null=True, blank=True)
    run_finished_at = models.DateTimeField(null=True, blank=True)
    run_body_cutoff = models.DateTimeField(null=True, blank=True)
    run_record_cutoff = models.DateTimeField(null=True, blank=True)
    # Where the run's text removal has come to: the last record it went past, in (created_at, id).
    run_body_position_at = models.DateTimeField(null=True, blank=True)
    run_body_position_id = models.BigIntegerField(default=0)
    run_bodies_removed = models.PositiveIntegerField(default=0)
    run_records_removed = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"retention of team {self.team_id}"

    @property
    def running(self) -> bool:
        return self.run_started_at is not None and self.run_finished_at is None
