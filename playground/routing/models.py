"""A team's routing policy: immutable versions, the latest in force (`routing.selectors`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from playground.accounts.models import Team


class RoutingPolicy(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="routing_policies")
    version = models.PositiveIntegerField()
    # As the user wrote it (connections by name): what the page shows and the command prints.
    document = models.JSONField()
    note = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-version"]
        constraints = [
            models.UniqueConstraint(fields=["team", "version"], name="routing_policy_version_unique")
        ]

    def __str__(self) -> str:
        return f"routing policy v{self.version} of team {self.team_id}"
