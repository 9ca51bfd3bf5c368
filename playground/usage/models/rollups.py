"""The rollup tables the charts read instead of the raw rows (docs/architecture.md, "Rollup
tables and how they are kept").
"""

from __future__ import annotations

from django.db import models

from playground.accounts.models import Team
from playground.usage.models.records import RequestPath, UsageStatus

# --- rollups ------------------------------------------------------------------------------
# Charts read these, never the raw rows. Written in the same transaction as each record by
# `playground.usage.rollups` (the rollup writer beside the record writer) and rebuilt from the
# raw rows by `manage.py rebuild_usage_rollups`.

# Fixed histogram edges in milliseconds: bucket i counts values in [EDGES[i], EDGES[i+1]),
# the last one everything from its edge up. Fixed edges make histograms add up across
# buckets, teams and models, so a percentile over any range combines exactly.
HISTOGRAM_EDGES_MS: tuple[int, ...] = (
    0, 50, 100, 150, 200, 300, 400, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500, 10000,
    15000, 20000, 30000, 60000,
)  # fmt: skip
HISTOGRAM_BUCKETS = len(HISTOGRAM_EDGES_MS)
TTFT_COLUMNS = tuple(f"ttft_h{i:02d}" for i in range(HISTOGRAM_BUCKETS))
LATENCY_COLUMNS = tuple(f"latency_h{i:02d}" for i in range(HISTOGRAM_BUCKETS))
# Costs are summed as integers of 1e-10 USD (the records' own precision), so sums are exact
# on every database (SQLite would add decimals as floats).
COST_SCALE = 10**10


class CacheState(models.TextChoices):
    HIT = "hit", "Cache hit"
    MISS = "miss", "Cache miss"
    UNKNOWN = "unknown", "Not reported"


class UsageRollupMeasures(models.Model):
    """One bucket of one combination of dimensions: counts, sums and histograms.

    A dimension that a record leaves empty is stored as 0 (user, connection, price card), so
    the unique key holds no NULL (NULLs never conflict) and upserts find their row.
    """

    # No index of its own: every key and index starts with the team, and PostgreSQL picked a lone
    # team index over (team, bucket) and read a whole team to chart a week (250 ms against 18 ms).
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    bucket = models.DateTimeField(help_text="Start of the UTC hour or day")
    model_id = models.CharField(max_length=200)
    price_card_id = models.BigIntegerField(default=0, help_text="0: unpriced")
    path = models.CharField(max_length=10, choices=RequestPath.choices)
    status = models.CharField(max_length=24, choices=UsageStatus.choices)
    affinity = models.BooleanField()
    cache_state = models.CharField(max_length=8, choices=CacheState.choices)

    requests = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)
    cache_write_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    input_cost_e10 = models.BigIntegerField(default=0)
    cached_input_cost_e10 = models.BigIntegerField(default=0)
    cache_write_cost_e10 = models.BigIntegerField(default=0)
    output_cost_e10 = models.BigIntegerField(default=0)
    total_cost_e10 = models.BigIntegerField(default=0)
    ttft_count = models.BigIntegerField(default=0)
    ttft_sum_ms = models.BigIntegerField(default=0)
    latency_count = models.BigIntegerField(default=0)
    latency_sum_ms = models.BigIntegerField(default=0)

    locals().update({name: models.BigIntegerField(default=0) for name in TTFT_COLUMNS + LATENCY_COLUMNS})

    DIMENSIONS: tuple[str, ...] = (
        "team_id", "bucket", "model_id", "price_card_id", "path", "status", "affinity", "cache_state",
    )  # fmt: skip

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.bucket:%Y-%m-%d %H:%M} {self.model_id} {self.status}: {self.requests}"


class UsageRollupBase(UsageRollupMeasures):
    """The full key: every dimension the dashboard filters or groups by, users and connections too."""

    user_id = models.BigIntegerField(default=0, help_text="0: none (deleted user)")
    connection_id = models.BigIntegerField(default=0, help_text="0: none (deleted connection)")

    DIMENSIONS = (
        "team_id", "bucket", "model_id", "price_card_id", "user_id", "connection_id", "path", "status",
        "affinity", "cache_state",
    )  # fmt: skip

    class Meta:
        abstract = True


def rollup_filter_indexes(kind: str) -> list[models.Index]:
    """A chart filtered by one user or connection reads only that one's buckets.

    Without these it read every bucket of the team and period and dropped the others: at
    10 M records a 90-day TTFT chart for one user took 201 ms (p50) against 60 ms with them.
    """
    return [
        models.Index(fields=["team", "user_id", "bucket"], name=f"usage_{kind}_team_user"),
        models.Index(fields=["team", "connection_id", "bucket"], name=f"usage_{kind}_team_conn"),
    ]


class UsageHourly(UsageRollupBase):
    class Meta:
        constraints = [
            models.UniqueConstraint(fields=UsageRollupBase.DIMENSIONS, name="one_usage_hourly_per_key")
        ]
        indexes = [
            models.Index(fields=["team", "bucket"], name="usage_hourly_team_bucket"),
            *rollup_filter_indexes("hourly"),
        ]


class UsageDaily(UsageRollupBase):
    class Meta:
        constraints = [
            models.UniqueConstraint(fields=UsageRollupBase.DIMENSIONS, name="one_usage_daily_per_key")
        ]
        indexes = [
            models.Index(fields=["team", "bucket"], name="usage_daily_team_bucket"),
            *rollup_filter_indexes("daily"),
        ]


# The same buckets without the user and connection dimensions. Users times connections
# multiply a team's keys by up to a hundred, so a chart that neither filters nor groups by
# them reads these: at 10 M records a 90-day chart sums ~10 k rows here against ~400 k above.


class UsageTeamHourly(UsageRollupMeasures):
    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=UsageRollupMeasures.DIMENSIONS, name="one_usage_team_hourly_per_key"
            )
        ]
        indexes = [models.Index(fields=["team", "bucket"], name="usage_team_hourly_bucket")]


class UsageTeamDaily(UsageRollupMeasures):
    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=UsageRollupMeasures.DIMENSIONS, name="one_usage_team_daily_per_key"
            )
        ]
        indexes = [models.Index(fields=["team", "bucket"], name="usage_team_daily_bucket")]


class UsageBucketSums(models.Model):
    """Counts, tokens and costs of one bucket, and no histogram: the coarse tables' measures."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    bucket = models.DateTimeField(help_text="Start of the UTC hour or day")
    requests = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)
    cache_write_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    input_cost_e10 = models.BigIntegerField(default=0)
    cached_input_cost_e10 = models.BigIntegerField(default=0)
    cache_write_cost_e10 = models.BigIntegerField(default=0)
    output_cost_e10 = models.BigIntegerField(default=0)
    total_cost_e10 = models.BigIntegerField(default=0)

    class Meta:
        abstract = True


class UsagePeopleBase(UsageBucketSums):
    """Counts, tokens and costs per team, bucket, user and connection, and nothing else.

    What "cost by user" and "cost by connection" read when no other dimension is filtered: at
    10 M records their 7-day chart summed ~200 k full-key rows (700 ms), against ~12 k here.
    """

    user_id = models.BigIntegerField(default=0, help_text="0: none (deleted user)")
    connection_id = models.BigIntegerField(default=0, help_text="0: none (deleted connection)")

    DIMENSIONS = ("team_id", "bucket", "user_id", "connection_id")

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.bucket:%Y-%m-%d %H:%M} user {self.user_id}: {self.requests}"


class UsagePeopleHourly(UsagePeopleBase):
    class Meta:
        constraints = [
            models.UniqueConstraint(fields=UsagePeopleBase.DIMENSIONS, name="one_usage_people_hourly_per_key")
        ]
        indexes = [models.Index(fields=["team", "bucket"], name="usage_people_hourly_bucket")]


class UsagePeopleDaily(UsagePeopleBase):
    class Meta:
        constraints = [
            models.UniqueConstraint(fields=UsagePeopleBase.DIMENSIONS, name="one_usage_people_daily_per_key")
        ]
        indexes = [models.Index(fields=["team", "bucket"], name="usage_people_daily_bucket")]


# The gateway's requests by who sent them: the team API key and the caller's end user
# (`x-playground-user`). Only records with a key or an end user are added (the app's own chat
# and batch requests have neither), so these stay as small as the gateway's traffic. A
# record's path is kept too, so the dashboard's path filter applies here as well.


class UsageKeyBase(UsageBucketSums):
    """Per team, bucket, API key and path: "cost by API key", and the dashboard filtered by a key."""

    api_key_id = models.BigIntegerField(default=0, help_text="0: none (deleted key)")
    path = models.CharField(max_length=10, choices=RequestPath.choices)

    DIMENSIONS: tuple[str, ...] = ("team_id", "bucket", "api_key_id", "path")

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.bucket:%Y-%m-%d %H:%M} key {self.api_key_id}: {self.requests}"


class UsageKeyHourly(UsageKeyBase):
    class Meta:
        constraints = [
            models.UniqueConstraint(fields=UsageKeyBase.DIMENSIONS, name="one_usage_key_hourly_per_key")
        ]
        indexes = [models.Index(fields=["team", "api_key_id", "bucket"], name="usage_key_hourly_by_key")]


class UsageKeyDaily(UsageKeyBase):
    class Meta:
        constraints = [
            models.UniqueConstraint(fields=UsageKeyBase.DIMENSIONS, name="one_usage_key_daily_per_key")
        ]
        indexes = [models.Index(fields=["team", "api_key_id", "bucket"], name="usage_key_daily_by_key")]


class UsageEndUserBase(UsageKeyBase):
    """The key tables split by end user ("" when the request named none): "cost by end user",
    and the dashboard filtered by an end user, a key, or both. The key tables are these summed
    over end users, kept apart because a team has a few keys and may have many end users."""

    end_user = models.CharField(max_length=1024, blank=True, help_text="x-playground-user")

    DIMENSIONS = ("team_id", "bucket", "end_user", "api_key_id", "path")

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.bucket:%Y-%m-%d %H:%M} end user {self.end_user!r}: {self.requests}"


def end_user_indexes(kind: str) -> list[models.Index]:
    """One end user's or one key's buckets, without reading the team's others."""
    return [
        models.Index(fields=["team", "end_user", "bucket"], name=f"usage_end_user_{kind}_by_user"),
        models.Index(fields=["team", "api_key_id", "bucket"], name=f"usage_end_user_{kind}_by_key"),
    ]


class UsageEndUserHourly(UsageEndUserBase):
    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=UsageEndUserBase.DIMENSIONS, name="one_usage_end_user_hourly_per_key"
            )
        ]
        indexes = end_user_indexes("hourly")


class UsageEndUserDaily(UsageEndUserBase):
    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=UsageEndUserBase.DIMENSIONS, name="one_usage_end_user_daily_per_key"
            )
        ]
        indexes = end_user_indexes("daily")


# The requests a preset version sent (a conversation started from one, a batch configured by
# one): "cost and cached share per prompt version" on the dashboard. Only records that name a
# version are added, so these stay as small as that traffic; the cache state is kept so the
# cached share counts only the prompts whose provider reported caching.


class UsagePresetBase(UsageBucketSums):
    """Per team, bucket, preset version, path and cache state."""

    preset_version_id = models.BigIntegerField()
    path = models.CharField(max_length=10, choices=RequestPath.choices)
    cache_state = models.CharField(max_length=8, choices=CacheState.choices)

    DIMENSIONS = ("team_id", "bucket", "preset_version_id", "path", "cache_state")

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.bucket:%Y-%m-%d %H:%M} preset version {self.preset_version_id}: {self.requests}"


class UsagePresetHourly(UsagePresetBase):
    class Meta:
        constraints = [
            models.UniqueConstraint(fields=UsagePresetBase.DIMENSIONS, name="one_usage_preset_hourly_per_key")
        ]
        indexes = [models.Index(fields=["team", "bucket"], name="usage_preset_hourly_bucket")]


class UsagePresetDaily(UsagePresetBase):
    class Meta:
        constraints = [
            models.UniqueConstraint(fields=UsagePresetBase.DIMENSIONS, name="one_usage_preset_daily_per_key")
        ]
        indexes = [models.Index(fields=["team", "bucket"], name="usage_preset_daily_bucket")]


class UsageConversationDaily(models.Model):
    """Per conversation and UTC day: enough to rank conversations by cost over any range."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    bucket = models.DateTimeField(help_text="Start of the UTC day")
    conversation_id = models.BigIntegerField()
    requests = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    total_cost_e10 = models.BigIntegerField(default=0)

    DIMENSIONS = ("team_id", "bucket", "conversation_id")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "bucket", "conversation_id"], name="one_usage_conv_day_per_key"
            )
        ]
        # The days of a few given conversations (the straddlers of `top_conversations`).
        indexes = [models.Index(fields=["team", "conversation_id", "bucket"], name="usage_conv_day_by_conv")]

    def __str__(self) -> str:
        return f"{self.bucket:%Y-%m-%d} conversation {self.conversation_id}: {self.requests}"


class UsageConversationTotal(models.Model):
    """Per conversation, all time: its sums and the first and last UTC day it was used.

    Ranking conversations by cost over a long period from the day rows sums every
    conversation-day of the period (~800 k at 10 M records over 90 days). With these totals the
    ranking reads the top few conversations lying wholly inside the period from an index, and
    sums day rows only for the few that straddle the period and could still rank
    (`analytics.selectors.conversations.top_conversations`).
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    conversation_id = models.BigIntegerField()
    first_bucket = models.DateTimeField(help_text="Start of the first UTC day with a record")
    last_bucket = models.DateTimeField(help_text="Start of the last UTC day with a record")
    requests = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    total_cost_e10 = models.BigIntegerField(default=0)

    DIMENSIONS = ("team_id", "conversation_id")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "conversation_id"], name="one_usage_conv_total_per_key")
        ]
        indexes = [
            models.Index(
                "team", models.F("total_cost_e10").desc(), "conversation_id", name="usage_conv_total_rank"
            )
        ]

    def __str__(self) -> str:
        return f"conversation {self.conversation_id}: {self.requests}"
