"""The cache breaks found when records are written (issue 40): a row per break, and their
sums by cause per hour, which the dashboard's "Cache breaks by cause" chart reads.

A break is found once, when its record is written (`usage.insights.cache_break_store`), by the
detector of `usage.insights.cache_breaks`, against the session's previous answered request;
`rebuild_cache_breaks` recomputes them for records written before, or to audit them.
"""

from __future__ import annotations

from django.db import models

from playground.accounts.models import Team
from playground.usage.models.records import UsageRecord


class UsageCacheBreak(models.Model):
    """The break at `record`: a row per break, not columns on every record, because most records
    do not break and the record's pages, the conversation and `manage.py cache_breaks` read only
    breaks. It goes with its record (retention deletes both). The session's name is not kept
    (it is read from the record, whose session an erasure scrubs) but for an inferred session,
    whose name holds only ids."""

    record = models.OneToOneField(
        UsageRecord, primary_key=True, on_delete=models.CASCADE, related_name="cache_break"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    created_at = models.DateTimeField(help_text="The record's")
    # Not a foreign key: a break found stays as found when retention deletes the older request.
    previous_record_id = models.BigIntegerField()
    inferred_session = models.CharField(max_length=80, blank=True)
    cause = models.CharField(max_length=40)
    detail = models.CharField(max_length=300)
    cached_tokens = models.BigIntegerField()
    expected_cached_tokens = models.BigIntegerField()
    lost_usd = models.DecimalField(max_digits=24, decimal_places=12)
    changed_turn = models.IntegerField(null=True)
    # The request's place among those the detector read: an inferred session's turn (its chain is
    # read whole); other sessions' turns are counted from their start where they are shown.
    turn = models.IntegerField()

    class Meta:
        indexes = [models.Index(fields=["team", "created_at"], name="usage_break_team_time")]

    def __str__(self) -> str:
        return f"record {self.record_id}: {self.cause}"


class UsageCacheBreakHourly(models.Model):
    """The breaks of a team's hour by cause: what they lost in tokens and in 1e-10 USD."""

    DIMENSIONS = ("team_id", "bucket", "cause")

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    bucket = models.DateTimeField(help_text="Start of the UTC hour")
    cause = models.CharField(max_length=40)
    breaks = models.BigIntegerField(default=0)
    lost_tokens = models.BigIntegerField(default=0)
    lost_e10 = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "bucket", "cause"], name="one_usage_break_hour_per_cause")
        ]

    def __str__(self) -> str:
        return f"{self.bucket:%Y-%m-%d %H:00} {self.cause}: {self.breaks}"
