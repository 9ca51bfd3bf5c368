"""One row per upstream request: the heart of the observability side.

Written only by `playground.usage.records.usage_record_create`; costs are computed only by
`playground.usage.pricing`.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import F, OrderBy, Q

from playground.accounts.models import StoreMode, Team
from playground.catalog.models import PriceCard
from playground.providers.models import ProviderConnection
from playground.usage.models.api_keys import ApiKey
from playground.usage.models.retention import BodyRemoved


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
    GATEWAY = "gateway", "Gateway"
    COMPARE = "compare", "Compare column"


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
    # The preset version whose setup sent it (a conversation started from one, a batch configured
    # by one), by id like the conversation: usage stands below presets, and records stay.
    preset_version_id = models.BigIntegerField(null=True, blank=True)
    # The prompt variables' values the request was sent with ({name: value as sent}), if any.
    variables = models.JSONField(null=True, blank=True)
    path = models.CharField(max_length=10, choices=RequestPath.choices, default=RequestPath.CHAT)
    affinity_key = models.CharField(max_length=120, blank=True)
    streamed = models.BooleanField(default=True)
    status = models.CharField(max_length=24, choices=UsageStatus.choices)

    prompt_tokens = models.PositiveIntegerField(default=0)
    # NULL means the provider did not say; it is not the same as zero.
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    # Tokens written to the prompt cache (of `prompt_tokens`, apart from the cached ones); NULL
    # when the provider did not say (Workers AI does not separate them from fresh input).
    cache_write_tokens = models.PositiveIntegerField(null=True, blank=True)
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
    # `db_default`: bulk loaders writing SQL of their own (the dashboard benchmark) need not name it.
    cache_write_cost = models.DecimalField(max_digits=18, decimal_places=10, default=0, db_default=0)
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
    # The body as sent upstream: no credentials, and each image replaced by its hash, type and size;
    # redacted or not kept at all as `store_mode` says.
    request_body = models.JSONField(null=True, blank=True)
    # What this record kept of its text (`accounts.StoreMode`, `usage.redacting`): the key's or the
    # team's mode, or less when the request asked (x-playground-store) or the redactor failed.
    store_mode = models.CharField(
        max_length=10, choices=StoreMode.choices, default=StoreMode.FULL, db_default=StoreMode.FULL
    )
    # How many values of each kind were replaced ({"email": 2, "phone": 1}); {} when none, None
    # when the text was kept in full. "redactor_error": 1 when the redactor failed.
    redactions = models.JSONField(null=True, blank=True)
    # The text above (body, variables, error text, schema errors) was removed afterwards, and why
    # (`BodyRemoved`: the team's retention); "" while it is kept.
    body_removed_by = models.CharField(max_length=10, choices=BodyRemoved.choices, blank=True, db_default="")
    body_removed_at = models.DateTimeField(null=True, blank=True)
    # Its prompt prefix in hashed sections (`usage.prefix_digest`): the cache-break detector
    # compares these instead of reading two bodies.
    prefix_digest = models.JSONField(null=True, blank=True)
    # Whether the answer held to the JSON response format the request asked for (`usage.records`,
    # `providers.structured_answers`): the json_schema's name or "json_object"; None when no JSON
    # format was asked or no whole answer came back; the first few errors as [{"path", "message"}].
    schema_name = models.CharField(max_length=64, blank=True, db_default="")
    schema_valid = models.BooleanField(null=True, blank=True)
    schema_errors = models.JSONField(null=True, blank=True)

    # --- attribution: what a gateway request said about itself (empty for the app's own paths) ---
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # `db_default`: bulk loaders writing SQL of their own (the dashboard benchmark) need not name them.
    end_user = models.CharField(max_length=1024, blank=True, db_default="", help_text="x-playground-user")
    session = models.CharField(max_length=1024, blank=True, db_default="", help_text="x-playground-session")
    # x-playground-tags as ",a,b," (leading and trailing commas), so one tag is `contains=",a,"`
    # on every database (SQLite has no JSON containment).
    tags = models.CharField(max_length=1100, blank=True, db_default="")
    metadata = models.JSONField(null=True, blank=True, help_text="x-playground-metadata")
    trace_id = models.CharField(max_length=32, blank=True, db_default="", help_text="From traceparent")

    # --- routing: what the team's routing policy decided for a gateway request (issue 35) ---
    # The rule that matched ("" when none did, or no policy), and whether the request fell back
    # past its first target or was downgraded: columns, so the request log filters on them.
    route_rule = models.CharField(max_length=100, blank=True, db_default="")
    route_fell_back = models.BooleanField(default=False, db_default=False)
    route_downgraded = models.BooleanField(default=False, db_default=False)
    # The decision in full (`usage.calls.context.RouteRecord.detail`): the policy version, this
    # record's attempt, every attempt of the request, the final target, a downgrade and its reason.
    routing = models.JSONField(null=True, blank=True)
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
            models.Index(fields=["team", "api_key", "created_at", "id"], name="usage_log_team_key"),
            models.Index(fields=["team", "end_user", "created_at", "id"], name="usage_log_team_end_user"),
            models.Index(fields=["team", "session", "created_at", "id"], name="usage_log_team_session"),
            models.Index(
                fields=["team", "preset_version_id", "created_at", "id"], name="usage_log_team_preset"
            ),
            models.Index(fields=["team", "total_cost", "id"], name="usage_log_team_cost"),
            # The dashboard's schema conformance reads the few records that asked for a JSON format.
            models.Index(
                fields=["team", "created_at"],
                condition=Q(schema_valid__isnull=False),
                name="usage_team_structured",
            ),
            # The dashboard's routing outcomes read the records a routing policy decided.
            models.Index(
                fields=["team", "created_at"],
                condition=Q(routing__isnull=False),
                name="usage_team_routed",
            ),
            # The dashboard's redactions chart reads the records that were redacted (issue 37).
            models.Index(
                fields=["team", "created_at"],
                condition=Q(redactions__isnull=False),
                name="usage_team_redacted",
            ),
            models.Index(fields=["team", "prompt_tokens", "id"], name="usage_log_team_prompt"),
            # The dashboard's time to first token by tag reads the latest tagged answers, newest
            # first, without walking past the untagged ones (issue 40).
            models.Index(
                fields=["team", "created_at", "id"],
                condition=~Q(tags="") & Q(status=UsageStatus.OK, ttft_ms__isnull=False),
                name="usage_team_tagged_ttft",
            ),
            # A session named only by its affinity key: the cache-break detector's look-up of the
            # session's previous request when a record is written (issue 40).
            models.Index(
                fields=["team", "affinity_key", "created_at", "id"],
                condition=Q(conversation_id__isnull=True, session=""),
                name="usage_team_affinity_session",
            ),
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
