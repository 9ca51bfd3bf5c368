"""A team's routing policy: immutable versions, the latest in force (`routing.selectors`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from playground.accounts.models import ChainedEntry, Team


class RoutingPolicy(ChainedEntry):
    """One version, a link of the team's chain of decision records (`routing.chain`)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="routing_policies")
    version = models.PositiveIntegerField()
    # As the user wrote it (connections by name): what the page shows and the command prints.
    document = models.JSONField()
    note = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Set when the version is made, not when saved: its hash is taken before the insert.
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-version"]
        constraints = [
            models.UniqueConstraint(fields=["team", "version"], name="routing_policy_version_unique"),
            models.UniqueConstraint(fields=["team", "chain_seq"], name="routing_policy_chain_place_unique"),
        ]

    def __str__(self) -> str:
        return f"routing policy v{self.version} of team {self.team_id}"
