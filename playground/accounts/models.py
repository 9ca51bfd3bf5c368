"""Teams and who belongs to them. Every other object in the app belongs to a team."""

from __future__ import annotations

import zoneinfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone


def time_zone_validate(value: str) -> None:
    if value not in zoneinfo.available_timezones():
        raise ValidationError(f"{value!r} is not a time zone name (e.g. UTC, Europe/Paris, Asia/Tokyo).")


class StoreMode(models.TextChoices):
    """What a usage record keeps of its request's text (issue 37), from most to least: the body
    as sent; the body with e-mail addresses, phone and card numbers, IBANs, IP addresses and
    secrets replaced by placeholders (`playground.lib.redaction`); or no text at all, only
    tokens, cost, timings, the model, attribution and the prompt's digests."""

    FULL = "full", "Full: the text as sent"
    REDACTED = "redacted", "Redacted: sensitive values replaced"
    METADATA = "metadata", "Metadata only: no prompt or answer text"


class Team(models.Model):
    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=60, unique=True)
    # Budget months start at midnight on the 1st in this zone.
    time_zone = models.CharField(max_length=64, default="UTC", validators=[time_zone_validate])
    # What the records of the team's chat, compare and batch requests keep of their text, and of
    # its gateway keys' requests unless a key says otherwise (`ApiKey.store_mode`).
    store_mode = models.CharField(
        max_length=10, choices=StoreMode.choices, default=StoreMode.FULL, db_default=StoreMode.FULL
    )
    # Upstream redaction (issue 37): the team's requests go to the model with the same typed
    # placeholders their records keep (`usage.calls.upstream`), not the values. Off: sent as written.
    upstream_redaction = models.BooleanField(default=False, db_default=False)
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
    # Optional monthly cap on what this member's requests may cost (USD); blank: only the team's.
    monthly_budget_usd = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="one_membership_per_team_user")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


# --- invitations and audit ---------------------------------------------------------------------


class Invitation(models.Model):
    """A one-time link to join a team. Only the token's SHA-256 is stored; the link is shown once."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    note = models.CharField(max_length=200, blank=True, help_text="Who it is for (shown to admins only)")
    # Pre-fills the sign-up form of someone who has no account yet; the link is the credential.
    email = models.EmailField(blank=True)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.get_role_display()} invitation to {self.team}"


class AuditAction(models.TextChoices):
    MEMBER_INVITED = "member.invited", "Invited a member"
    INVITATION_REVOKED = "invitation.revoked", "Revoked an invitation"
    MEMBER_JOINED = "member.joined", "Joined the team"
    ROLE_CHANGED = "member.role_changed", "Changed a role"
    MEMBER_REMOVED = "member.removed", "Removed a member"
    MEMBER_LEFT = "member.left", "Left the team"
    OWNERSHIP_TRANSFERRED = "team.ownership_transferred", "Transferred ownership"
    CONNECTION_CREATED = "connection.created", "Added a connection"
    CONNECTION_UPDATED = "connection.updated", "Changed a connection"
    CONNECTION_DELETED = "connection.deleted", "Deleted a connection"
    PRICE_OVERRIDE_CREATED = "price_override.created", "Added a price override"
    PRICE_OVERRIDE_DELETED = "price_override.deleted", "Deleted a price override"
    PRICE_CARD_CREATED = "price_card.created", "Added a global price card"
    BUDGET_CHANGED = "budget.changed", "Changed the team budget"
    MEMBER_BUDGET_CHANGED = "budget.member_changed", "Changed a member's budget"
    UNPRICED_REQUESTS_CHANGED = "budget.unpriced_changed", "Changed whether unpriced requests are allowed"
    API_KEY_CREATED = "api_key.created", "Created an API key"
    API_KEY_UPDATED = "api_key.updated", "Changed an API key"
    API_KEY_REVOKED = "api_key.revoked", "Revoked an API key"
    STORE_MODE_CHANGED = "team.store_mode_changed", "Changed what request records keep"
    UPSTREAM_REDACTION_CHANGED = "team.upstream_redaction_changed", "Changed what requests send upstream"
    RETENTION_CHANGED = "team.retention_changed", "Changed how long request records are kept"
    END_USER_ERASED = "team.end_user_erased", "Erased an end user's data"


class ChainedEntry(models.Model):
    """An entry of its team's chain of decision records (`playground.accounts.chain`): its place,
    the SHA-256 of its content and the hash of the entry before it. Written once, by
    `chain_append`; blank only on a row slipped in around it."""

    chain_seq = models.PositiveIntegerField(null=True, blank=True, editable=False)
    chain_digest = models.CharField(max_length=64, blank=True, editable=False)
    chain_prev = models.CharField(max_length=64, blank=True, editable=False)

    class Meta:
        abstract = True


class DecisionChain(models.Model):
    """The head of a team's chain: how many entries it holds and the last one's hash. Written
    first by every append, so it is also what serializes a team's appends."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, primary_key=True, related_name="+")
    length = models.PositiveIntegerField(default=0)
    head = models.CharField(max_length=64, blank=True)

    def __str__(self) -> str:
        return f"chain of team {self.team_id}: {self.length} entries"


class AuditEvent(ChainedEntry):
    """Who changed what in a team, and when. Never holds a secret (tokens: "changed" only)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="audit_events")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True, help_text="Kept when the account is deleted")
    action = models.CharField(max_length=40, choices=AuditAction.choices)
    target = models.CharField(max_length=200, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    # Set when the event is made, not when saved: its hash is taken before the insert.
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["team", "chain_seq"], name="audit_event_chain_place_unique")
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_name} {self.action} {self.target}"
