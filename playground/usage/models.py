"""One row per upstream request: the heart of the observability side.

Written only by `playground.usage.services.usage_record_create`; costs are computed only by
`playground.usage.pricing`. Below them: the rollups the charts read, and the budget ledgers
(`playground.usage.budgets`).
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, OrderBy

from playground.accounts.models import Team
from playground.catalog.models import PriceCard
from playground.providers.models import ProviderConnection


class UsageStatus(models.TextChoices):
    OK = "ok", "OK"
    UPSTREAM_ERROR = "upstream_error", "Upstream error"
    TIMEOUT = "timeout", "Timeout"
    CLIENT_DISCONNECTED = "client_disconnected", "Client disconnected"
    REJECTED = "rejected", "Rejected"


class UsageSource(models.TextChoices):
    PROVIDER = "provider", "Reported by the provider"
    ESTIMATED = "estimated", "Estimated (provider sent no usage)"


class RequestPath(models.TextChoices):
    CHAT = "chat", "Chat"
    BATCH = "batch", "Batch item"


class NullsLastIndex(models.Index):
    """An index in `ORDER BY x DESC NULLS LAST` order, on SQLite too.

    SQLite refuses NULLS LAST in an index, but it sorts NULL lowest, so plain DESC already
    puts NULLs last there.
    """

    def create_sql(self, model: Any, schema_editor: Any, using: str = "", **kwargs: Any) -> Any:
        if schema_editor.connection.vendor != "sqlite":
            return super().create_sql(model, schema_editor, using=using, **kwargs)
        plain = self.clone()
        plain.expressions = tuple(
            OrderBy(part.expression, descending=part.descending) if isinstance(part, OrderBy) else part
            for part in self.expressions
        )
        return models.Index.create_sql(plain, model, schema_editor, using=using, **kwargs)


class UsageRecord(models.Model):
    request_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="usage_records")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    connection = models.ForeignKey(ProviderConnection, null=True, on_delete=models.SET_NULL, related_name="+")
    model_id = models.CharField(max_length=200)
    # The conversation of a chat turn, by id and not by foreign key: usage stands below chat and
    # a record outlives its conversation. Labels and links: `playground.usage.sources`.
    conversation_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    path = models.CharField(max_length=10, choices=RequestPath.choices, default=RequestPath.CHAT)
    affinity_key = models.CharField(max_length=120, blank=True)
    streamed = models.BooleanField(default=True)
    status = models.CharField(max_length=24, choices=UsageStatus.choices)

    prompt_tokens = models.PositiveIntegerField(default=0)
    # NULL means the provider did not say; it is not the same as zero.
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(null=True, blank=True)
    usage_source = models.CharField(max_length=10, choices=UsageSource.choices, default=UsageSource.PROVIDER)
    raw_usage = models.JSONField(null=True, blank=True)
    usage_implausible = models.BooleanField(
        default=False,
        help_text="The provider's figures were absurd (not finite, negative or out of range): "
        "the tokens are estimated and raw_usage keeps what it sent",
    )

    price_card = models.ForeignKey(
        PriceCard, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # The card's name as shown beside this record's cost, for the request's day (an alias or a
    # model priced as another says so): `catalog.selectors.price_card_label`.
    price_label = models.CharField(max_length=300, blank=True)
    input_cost = models.DecimalField(max_digits=18, decimal_places=10, default=0)
    cached_input_cost = models.DecimalField(max_digits=18, decimal_places=10, default=0)
    output_cost = models.DecimalField(max_digits=18, decimal_places=10, default=0)
    total_cost = models.DecimalField(max_digits=18, decimal_places=10, default=0)

    ttft_ms = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    upstream_request_id = models.CharField(max_length=200, blank=True)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error_code = models.CharField(max_length=40, blank=True)
    error_text = models.TextField(blank=True, help_text="Upstream error, secrets redacted")
    # What caused the request, for paths without a key of their own here (e.g. "batch-item:42:1"):
    # unique when set, so a redelivered task cannot write a second record for the same attempt.
    source = models.CharField(max_length=64, blank=True)
    # The body as sent upstream: no secrets, and each image replaced by its hash, type and size.
    request_body = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        # The request log's filters: each walks (created_at, id) backwards inside its column, so a
        # first page or a keyset page reads about one page of index entries.
        indexes = [
            models.Index(fields=["team", "created_at", "id"], name="usage_log_team_time"),
            models.Index(fields=["team", "model_id", "created_at", "id"], name="usage_log_team_model"),
            models.Index(fields=["team", "status", "created_at", "id"], name="usage_log_team_status"),
            models.Index(fields=["team", "user", "created_at", "id"], name="usage_log_team_user"),
            models.Index(fields=["team", "connection", "created_at", "id"], name="usage_log_team_conn"),
            models.Index(fields=["team", "total_cost", "id"], name="usage_log_team_cost"),
            models.Index(fields=["team", "prompt_tokens", "id"], name="usage_log_team_prompt"),
            # The log sorts these slowest first with the unmeasured (NULL) last.
            NullsLastIndex(
                "team", F("latency_ms").desc(nulls_last=True), F("id").desc(), name="usage_log_team_latency"
            ),
            NullsLastIndex(
                "team", F("ttft_ms").desc(nulls_last=True), F("id").desc(), name="usage_log_team_ttft"
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["source"], condition=~models.Q(source=""), name="one_usage_record_per_source"
            )
        ]

    def __str__(self) -> str:
        return f"{self.request_id} {self.model_id} {self.status}"


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
    completion_tokens = models.BigIntegerField(default=0)
    input_cost_e10 = models.BigIntegerField(default=0)
    cached_input_cost_e10 = models.BigIntegerField(default=0)
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


class UsagePeopleBase(models.Model):
    """Counts, tokens and costs per team, bucket, user and connection, and nothing else.

    What "cost by user" and "cost by connection" read when no other dimension is filtered: at
    10 M records their 7-day chart summed ~200 k full-key rows (700 ms), against ~12 k here.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    bucket = models.DateTimeField(help_text="Start of the UTC hour or day")
    user_id = models.BigIntegerField(default=0, help_text="0: none (deleted user)")
    connection_id = models.BigIntegerField(default=0, help_text="0: none (deleted connection)")
    requests = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    input_cost_e10 = models.BigIntegerField(default=0)
    cached_input_cost_e10 = models.BigIntegerField(default=0)
    output_cost_e10 = models.BigIntegerField(default=0)
    total_cost_e10 = models.BigIntegerField(default=0)

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


# --- budgets -----------------------------------------------------------------------------------
# Made in `accounts` and moved here, where their behaviour is (`playground.usage.budgets`),
# without copying a row: each keeps its table (`db_table`), and the move only changed the
# migration state (usage 0011, accounts 0005).

DEFAULT_ALERT_THRESHOLDS = [50, 80, 100]


def thresholds_validate(value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(v, int) and 1 <= v <= 1000 for v in value):
        raise ValidationError("Alert thresholds are whole percentages between 1 and 1000.")


class TeamBudget(models.Model):
    """A team's monthly budget; no row (or a blank limit) means no limit."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="budget")
    monthly_limit_usd = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    alert_thresholds = models.JSONField(default=list, validators=[thresholds_validate])
    # Owners only: send requests for models with no price card that day although a budget
    # applies (they are recorded unpriced and count nothing). Off: such requests are refused.
    allow_unpriced = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "accounts_teambudget"

    def __str__(self) -> str:
        return f"{self.team}: {self.monthly_limit_usd or 'no'} USD a month"


class BudgetLedger(models.Model):
    """What a team (user NULL) or one member spent and has reserved in one budget month.

    The row every admission updates with one conditional UPDATE (`playground.usage.budgets.ledger`):
    `spent + reserved + cost <= limit` is checked and `reserved` raised in the same statement,
    so concurrent requests cannot all pass a check made before any of them is counted.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_ledgers")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE)
    month = models.DateField(help_text="The first day of the month, in the team's time zone")
    spent_usd = models.DecimalField(max_digits=18, decimal_places=10, default=Decimal(0))
    reserved_usd = models.DecimalField(max_digits=18, decimal_places=10, default=Decimal(0))

    class Meta:
        db_table = "accounts_budgetledger"
        constraints = [
            models.UniqueConstraint(
                fields=["team", "month"],
                condition=models.Q(user__isnull=True),
                name="one_team_ledger_per_month",
            ),
            models.UniqueConstraint(
                fields=["team", "month", "user"],
                condition=models.Q(user__isnull=False),
                name="one_member_ledger_per_month",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team} {self.month:%Y-%m} {self.user or 'team'}"


class BudgetReservation(models.Model):
    """One request's worst-case cost, held on the ledgers until its usage record is written.

    Settled (once: a conditional UPDATE on `settled_at`) by the metered call's reconcile step,
    or released by the sweep when a process died between reserving and reconciling.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_reservations")
    team_ledger = models.ForeignKey(BudgetLedger, on_delete=models.CASCADE, related_name="+")
    member_ledger = models.ForeignKey(
        BudgetLedger, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    amount_usd = models.DecimalField(max_digits=18, decimal_places=10)
    actual_usd = models.DecimalField(max_digits=18, decimal_places=10, null=True, blank=True)
    label = models.CharField(max_length=120, blank=True, help_text="What reserved it (path, source)")
    created_at = models.DateTimeField(auto_now_add=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "accounts_budgetreservation"
        indexes = [models.Index(fields=["team", "settled_at", "created_at"])]

    def __str__(self) -> str:
        return f"{self.amount_usd} USD for {self.label or 'a request'}"


class BudgetAlert(models.Model):
    """A threshold a team crossed in a month: the banner, and the email sent once."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_alerts")
    month = models.DateField()
    threshold = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    emailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "accounts_budgetalert"
        constraints = [
            models.UniqueConstraint(
                fields=["team", "month", "threshold"], name="one_alert_per_threshold_month"
            )
        ]

    def __str__(self) -> str:
        return f"{self.team} {self.month:%Y-%m} {self.threshold}%"
