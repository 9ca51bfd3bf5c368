"""The rollups by session (issue 40): what the dashboard's runway and hit-ratio fragments rank
sessions by, without grouping every answered record of the period by its session first.

A session is `usage.insights.sessions.session_key` of a record (a conversation, else a gateway
session, else an affinity key). Only the records those fragments read are counted: answered
(`cache_break_selectors.ANSWERED`), with a prompt, and in a session. Written with the records
(`usage.session_rollups`) and rebuilt from them by `manage.py rebuild_session_rollups`.
"""

from __future__ import annotations

from django.db import models

from playground.accounts.models import Team

SESSION_KEY_MAX = 1040  # "session:" and the header's 1,024 characters


class UsageSessionMeasures(models.Model):
    """What a session's answered requests add up to, and when they were made."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    session_key = models.CharField(max_length=SESSION_KEY_MAX)
    requests = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    total_cost_e10 = models.BigIntegerField(default=0)
    # Extremes, kept by the upsert: the largest prompt (the context's peak), the first and last record.
    peak_prompt_tokens = models.BigIntegerField(default=0)
    first_at = models.DateTimeField()
    last_at = models.DateTimeField()

    SUMS = ("requests", "prompt_tokens", "cached_tokens", "completion_tokens", "total_cost_e10")

    class Meta:
        abstract = True


class UsageSessionHourly(UsageSessionMeasures):
    """Per session and UTC hour."""

    bucket = models.DateTimeField(help_text="Start of the UTC hour")

    DIMENSIONS = ("team_id", "session_key", "bucket")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "session_key", "bucket"], name="one_usage_session_hourly_per_key"
            )
        ]
        # The unique key reads a few sessions' hours of a period; this one, retention's old hours.
        indexes = [models.Index(fields=["team", "bucket"], name="usage_session_hourly_bucket")]

    def __str__(self) -> str:
        return f"{self.bucket:%Y-%m-%d %H}h {self.session_key}: {self.requests}"


class UsageSessionTotal(UsageSessionMeasures):
    """Per session, all time: upper bounds of what it adds up to in any period, walked in
    order by the rankings (`analytics.selectors.session_rankings`)."""

    DIMENSIONS = ("team_id", "session_key")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "session_key"], name="one_usage_session_total_per_key")
        ]
        indexes = [
            models.Index(
                "team", models.F("prompt_tokens").desc(), "session_key", name="usage_session_total_prompt"
            ),
            models.Index(
                "team", models.F("peak_prompt_tokens").desc(), "session_key", name="usage_session_total_peak"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_key}: {self.requests}"
