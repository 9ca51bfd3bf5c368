"""Batches: many requests for one model, run on Celery, each item a first-class usage record.

A batch is a draft until the user confirms it (validated, previewed, estimated; nothing is
queued). Its items live here, one row per input line, unique per (batch, index), with their
state: pending -> submitted -> done / failed / cancelled. The chain of Celery steps that runs
a batch owns it through `chain_token` and a renewable `lease_until`, so a second chain (a
redelivered task, a resumed one) never runs the same items at the same time.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from playground.accounts.models import Team
from playground.providers.models import ProviderConnection
from playground.usage.sources import BATCH_ITEM, source_string


class BatchStatus(models.TextChoices):
    DRAFT = "draft", "Draft (not confirmed)"
    RUNNING = "running", "Running"
    DONE = "done", "Finished"
    CANCELLED = "cancelled", "Cancelled"


class BatchPath(models.TextChoices):
    QUEUE = "queue", "Provider queue"
    CONCURRENT = "concurrent", "Concurrent requests"


class InputKind(models.TextChoices):
    JSONL = "jsonl", "JSONL"
    CSV = "csv", "CSV and a prompt template"


class Batch(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="batches")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    connection = models.ForeignKey(ProviderConnection, null=True, on_delete=models.SET_NULL, related_name="+")
    model_id = models.CharField(max_length=200)
    name = models.CharField(max_length=200, blank=True)
    input_kind = models.CharField(max_length=10, choices=InputKind.choices)
    # The conversation whose settings (system prompt, tools, response format, parameters) every
    # item carries, when the batch started from one (kept as an id: batches do not import chat).
    from_conversation_id = models.PositiveBigIntegerField(null=True, blank=True)
    # The preset version that configured it (connection, model, settings); its items' records name it.
    preset_version = models.ForeignKey(
        "presets.PresetVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=10, choices=BatchStatus.choices, default=BatchStatus.DRAFT)
    path = models.CharField(max_length=10, choices=BatchPath.choices)
    path_reason = models.CharField(max_length=300)
    item_count = models.PositiveIntegerField(default=0)
    # The preview rows and the pre-flight estimate shown before confirming.
    preview = models.JSONField(default=list, blank=True)
    # Tags every item's record carries, with the item's `external_reference` (an experiment's
    # batch: "experiment:12", "eval-target:3"), so the request log can filter what caused them.
    record_tags = models.JSONField(default=list, blank=True)
    estimate = models.JSONField(default=dict, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    # Items are priced by the card of this day (the day the batch was submitted).
    priced_on = models.DateField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    # Who runs it: the chain holding `chain_token` and, while a step runs, the lease.
    chain_token = models.CharField(max_length=32, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    next_step_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["team", "created_at"]), models.Index(fields=["status"])]

    def __str__(self) -> str:
        return self.name or f"Batch {self.pk}"


class ItemState(models.TextChoices):
    PENDING = "pending", "Pending"
    SUBMITTED = "submitted", "Submitted"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class SubmissionState(models.TextChoices):
    SUBMITTING = "submitting", "Being submitted"
    POLLING = "polling", "Queued upstream"
    DONE = "done", "Results received"
    FAILED = "failed", "Failed"


class BatchSubmission(models.Model):
    """One `?queueRequest=true` submission (under 10 MB) and its polling."""

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="submissions")
    state = models.CharField(
        max_length=10, choices=SubmissionState.choices, default=SubmissionState.SUBMITTING
    )
    request_id = models.CharField(max_length=200, blank=True)
    item_count = models.PositiveIntegerField(default=0)
    size_bytes = models.PositiveIntegerField(default=0)
    submit_attempts = models.PositiveSmallIntegerField(default=0)
    polls = models.PositiveIntegerField(default=0)
    poll_errors = models.PositiveSmallIntegerField(default=0)
    submitted_at = models.DateTimeField(null=True, blank=True)
    next_poll_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    # The budget held for the whole submission (`usage.budgets.budget_reserve`), settled once
    # its items are recorded or failed.
    budget_reservation_id = models.PositiveBigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"submission {self.pk} of batch {self.batch_id} ({self.state})"


class BatchItem(models.Model):
    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="items")
    index = models.PositiveIntegerField()  # 0-based position in the input
    line = models.PositiveIntegerField()  # the input line (or CSV row) it came from, for messages
    external_reference = models.CharField(max_length=200, blank=True)
    # The request body as validated (messages and parameters; the model is the batch's).
    request = models.JSONField()
    state = models.CharField(max_length=10, choices=ItemState.choices, default=ItemState.PENDING)
    attempt = models.PositiveSmallIntegerField(default=1)  # a retry of a failed item is a new attempt
    submission = models.ForeignKey(
        BatchSubmission, null=True, blank=True, on_delete=models.SET_NULL, related_name="items"
    )
    position = models.PositiveIntegerField(null=True, blank=True)  # its `id` in that submission
    # {"text", "reasoning", "tool_calls", "finish_reason"} once answered.
    response = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    error_code = models.CharField(max_length=40, blank=True)
    # The provider refused this item's own request (a parameter, its size): sent again
    # unchanged it would fail the same way, so "Retry failed" leaves it and says so.
    input_refused = models.BooleanField(default=False)
    usage_record = models.OneToOneField(
        "usage.UsageRecord", null=True, blank=True, on_delete=models.SET_NULL, related_name="batch_item"
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["batch", "index"]
        constraints = [models.UniqueConstraint(fields=["batch", "index"], name="one_item_per_batch_index")]
        indexes = [models.Index(fields=["batch", "state"])]

    def __str__(self) -> str:
        return f"item {self.index} of batch {self.batch_id} ({self.state})"

    @property
    def source(self) -> str:
        """The usage record's `source`: one record per item and attempt, whatever redelivers it."""
        return source_string(BATCH_ITEM, self.pk, self.attempt)
