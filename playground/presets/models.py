"""Team presets: a named setup (connection, model, prompt, tools, format, parameters) and its versions.

A version is immutable once written: saving a preset again adds the next version, so a usage
record that names a version (`UsageRecord.preset_version_id`) always means the setup it ran.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from playground.accounts.models import Team
from playground.providers.models import ProviderConnection

NAME_MAX_CHARS = 120


class Preset(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="presets", db_index=False)
    name = models.CharField(max_length=NAME_MAX_CHARS)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)  # when its newest version was saved

    class Meta:
        ordering = ["-updated_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="one_preset_name_per_team")]

    def __str__(self) -> str:
        return self.name


class VersionImmutable(Exception):
    """A saved version was about to be changed: save a new version instead."""


class PresetVersion(models.Model):
    preset = models.ForeignKey(Preset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()  # 1, 2, ... within the preset
    # The connection it ran on; its name and kind are kept in `setup` for export and for when
    # the connection is deleted.
    connection = models.ForeignKey(ProviderConnection, null=True, on_delete=models.SET_NULL, related_name="+")
    model_id = models.CharField(max_length=200)
    # The rest of the setup, as exported (`presets.setup.PresetSetup.document`).
    setup = models.JSONField()
    note = models.CharField(max_length=200, blank=True)  # what changed, in the saver's words
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["preset", "-number"]
        constraints = [models.UniqueConstraint(fields=["preset", "number"], name="one_preset_version_number")]

    def __str__(self) -> str:
        return f"{self.preset} v{self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise VersionImmutable(f"{self} is saved and cannot change; save a new version.")
        super().save(*args, **kwargs)
