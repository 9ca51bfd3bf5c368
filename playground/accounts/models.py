"""Teams and who belongs to them. Every other object in the app belongs to a team."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Team(models.Model):
    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=60, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    ADMIN = "admin", "Admin"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


# Roles that may send requests that cost money (chat, batches).
ROLES_THAT_CAN_RUN = frozenset({Role.OWNER, Role.ADMIN, Role.MEMBER})
# Roles that may manage connections, members and budgets.
ROLES_THAT_CAN_MANAGE = frozenset({Role.OWNER, Role.ADMIN})


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="one_membership_per_team_user")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"
