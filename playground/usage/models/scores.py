"""Scores on usage records (issue 39): a thumbs up or down, or a rating from 1 to 5, with a
comment, given by a person on the record page or by an application through the gateway
(`POST /v1/scores` with a team API key).

A record may carry several: each person's one score (which they may change) and each key's one
score per name (an application sends it again to change it). A score names its record by
foreign key (scores stand beside the records, on the usage floor) and copies the two things the
dashboard groups and bounds by, the record's preset version and time, so the chart of scores by
version reads the scores' own index and never the records (`analytics.selectors.scores`).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from playground.accounts.models import Team
from playground.usage.models.api_keys import ApiKey
from playground.usage.models.records import UsageRecord

RATING_MIN, RATING_MAX = 1, 5
COMMENT_MAX = 2000
NAME_MAX = 64


class ScoreKind(models.TextChoices):
    THUMBS = "thumbs", "Thumbs (1 up, 0 down)"
    RATING = "rating", f"Rating ({RATING_MIN}-{RATING_MAX})"


class ScoreOrigin(models.TextChoices):
    PERSON = "person", "A person, on the record page"
    API = "api", "An API key, through the gateway"


class Score(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    record = models.ForeignKey(UsageRecord, on_delete=models.CASCADE, related_name="scores")
    origin = models.CharField(max_length=10, choices=ScoreOrigin.choices)
    # Who gave it: a person (origin "person") or a key (origin "api"); kept when they are gone.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The application's name for what it scores ("helpfulness"); "" for a person's.
    name = models.CharField(max_length=NAME_MAX, blank=True, default="")
    kind = models.CharField(max_length=10, choices=ScoreKind.choices)
    value = models.PositiveSmallIntegerField()  # thumbs: 1 up, 0 down; rating: 1-5
    comment = models.TextField(blank=True, default="")
    # Copied from the record (neither ever changes): the dashboard's chart by preset version.
    preset_version_id = models.BigIntegerField(null=True, blank=True)
    record_created_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            # The dashboard's chart: a team's scores on the period's records, by version.
            models.Index(fields=["team", "record_created_at"], name="score_team_record_time"),
            # The request log's filter: a team's records with a score of this kind and value.
            models.Index(fields=["team", "kind", "value", "record"], name="score_team_kind_value"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["record", "user"],
                condition=Q(origin="person", user__isnull=False),
                name="one_score_per_person_and_record",
            ),
            models.UniqueConstraint(
                fields=["record", "api_key", "name"],
                condition=Q(origin="api", api_key__isnull=False),
                name="one_score_per_key_name_and_record",
            ),
            models.CheckConstraint(
                condition=(Q(kind="thumbs", value__lte=1))
                | Q(kind="rating", value__gte=RATING_MIN, value__lte=RATING_MAX),
                name="score_value_in_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}={self.value} on {self.record_id}"
