"""Evaluations: a team's datasets (versioned lists of items) and experiments over them.

A dataset's items are never edited in place: an edit adds rows and marks others removed, each
with the version number it happened in, so version N is the rows with `added_in <= N` and
(`removed_in` empty or `> N`), read page by page without loading the dataset whole. An
experiment names the version it ran on; each of its targets (a preset version, or a connection's
model with its own settings, as a Compare column) runs as one batch (`batches`), whose items are
the dataset's items in id order, so item `index` i of every target's batch answers the same
dataset item.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from playground.accounts.models import Team
from playground.providers.models import ProviderConnection

# A dataset item as its batch items and records name it: "eval-item:<id>".
ITEM_REFERENCE = "eval-item:"


class Dataset(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    version = models.PositiveIntegerField(default=0)  # the newest version's number (0: no items yet)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="one_dataset_name_per_team")]

    def __str__(self) -> str:
        return self.name


class DatasetVersion(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    item_count = models.PositiveIntegerField(default=0)
    change = models.CharField(max_length=300)  # what made it: "Uploaded items.jsonl: 20 items"
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["dataset", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "number"], name="one_dataset_version_number")
        ]

    def __str__(self) -> str:
        return f"{self.dataset_id} v{self.number}"


class DatasetUpload(models.Model):
    """An upload with bad lines: its good items wait (`DatasetItem.upload`) until the user
    confirms them (a new version) or discards them."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="uploads")
    file_name = models.CharField(max_length=200)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    item_count = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list)  # the first bad lines: [{"line", "message"}]
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"upload {self.file_name} to dataset {self.dataset_id}"


class DatasetItem(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="items")
    # The version it first belongs to; None while it waits in an unconfirmed upload.
    added_in = models.PositiveIntegerField(null=True, blank=True)
    removed_in = models.PositiveIntegerField(null=True, blank=True)  # the first version without it
    upload = models.ForeignKey(
        DatasetUpload, null=True, blank=True, on_delete=models.CASCADE, related_name="items"
    )
    line = models.PositiveIntegerField(null=True, blank=True)  # its line in the uploaded file
    # What is sent: plain `messages`, or an `input` (the user's message) with `variables`
    # filling the preset's {{variables}}.
    input = models.TextField(blank=True)
    messages = models.JSONField(null=True, blank=True)
    variables = models.JSONField(default=dict, blank=True)
    expected = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["dataset", "added_in", "id"])]

    def __str__(self) -> str:
        return f"item {self.pk} of dataset {self.dataset_id}"


class Experiment(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="experiments")
    name = models.CharField(max_length=200)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="experiments")
    dataset_version = models.PositiveIntegerField()
    item_count = models.PositiveIntegerField(default=0)
    # The checks every answer is scored by: [{"kind", ...its parameters}] (`evals.checks`).
    checks = models.JSONField(default=list)
    # The pre-flight: {"cost": str | None, "per_target": [...], "blocked": str} when created.
    estimate = models.JSONField(default=dict)
    started_at = models.DateTimeField(null=True, blank=True)  # None: a draft, nothing sent
    cancelled_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["team", "created_at"])]

    def __str__(self) -> str:
        return self.name or f"Experiment {self.pk}"


class TargetKind(models.TextChoices):
    PRESET_VERSION = "preset", "Preset version"
    CONNECTION = "connection", "Connection and model"


class ExperimentTarget(models.Model):
    """What the experiment runs, as one batch of the dataset's items: a preset version (its
    connection, model and settings), or a connection's model with the settings chosen on the
    experiment's form (kept here: no preset is made for it)."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="targets")
    position = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=10, choices=TargetKind.choices, default=TargetKind.PRESET_VERSION)
    label = models.CharField(max_length=200)  # "Support bot v3", "kimi-k2.5 @ Workers AI, t=0.2"
    preset_version = models.ForeignKey(
        "presets.PresetVersion", null=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A connection target's own: its connection and model, the parameters chosen (temperature,
    # max_tokens) and its system prompt, whose {{variables}} the items' variables fill.
    connection = models.ForeignKey(
        ProviderConnection, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    model_id = models.CharField(max_length=200, blank=True)
    parameters = models.JSONField(default=dict, blank=True)
    system_prompt = models.TextField(blank=True)
    batch = models.OneToOneField(
        "batches.Batch", null=True, on_delete=models.SET_NULL, related_name="experiment_target"
    )

    class Meta:
        ordering = ["experiment", "position"]
        constraints = [
            models.UniqueConstraint(fields=["experiment", "position"], name="one_target_per_position"),
            models.CheckConstraint(
                condition=Q(kind=TargetKind.PRESET_VERSION, model_id="")
                | (Q(kind=TargetKind.CONNECTION) & ~Q(model_id="")),
                name="connection_target_names_its_model",
            ),
        ]

    def __str__(self) -> str:
        return self.label


class CheckResult(models.Model):
    """One check's verdict on one answer (a target's batch item), stored when the answer is
    scored (`evals.services.scoring`) so the results page reads rows and never re-runs checks.

    A judge's row is made pending (`judged_at` empty) and filled by its call in the worker: the
    row's `attempt` names the call (`eval-judge:<row>:<attempt>`, its record's unique source),
    and `lease_until` keeps two workers from judging the same answer at once."""

    target = models.ForeignKey(ExperimentTarget, on_delete=models.CASCADE, related_name="results")
    batch_item = models.ForeignKey("batches.BatchItem", on_delete=models.CASCADE, related_name="+")
    index = models.PositiveIntegerField()  # the batch item's index: the dataset item's place
    position = models.PositiveSmallIntegerField()  # the check's place in `Experiment.checks`
    score = models.FloatField(null=True, blank=True)  # in [0, 1]; None: no verdict (yet)
    passed = models.BooleanField(default=False)
    reason = models.TextField(blank=True)
    judged_at = models.DateTimeField(null=True, blank=True)  # None: a judge's verdict to come
    attempt = models.PositiveSmallIntegerField(default=0)
    lease_until = models.DateTimeField(null=True, blank=True)
    usage_record = models.ForeignKey(
        "usage.UsageRecord", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["target", "index", "position"]
        constraints = [
            models.UniqueConstraint(fields=["batch_item", "position"], name="one_result_per_item_check")
        ]
        indexes = [
            models.Index(fields=["target", "index"]),
            models.Index(fields=["target", "judged_at"]),
        ]

    def __str__(self) -> str:
        return f"check {self.position} of item {self.batch_item_id}"
