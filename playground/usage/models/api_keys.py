"""Team API keys: how a team's own applications send requests through the gateway.

A key stands on the usage floor, beside the records and budgets it is metered by: a record
names the key that sent it, and a key may carry a monthly budget of its own, held like the
team's and the member's (`playground.usage.budgets`). The gateway (`playground.gateway`)
authenticates with it; the team pages create and revoke it. Only the SHA-256 of the secret
is stored (a key has 256 random bits, so a fast hash is enough), with its first characters
to tell keys apart.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from playground.accounts.models import StoreMode, Team
from playground.providers.models import ProviderConnection

TEAM_STORE_MODE = ""  # a key's `store_mode` that follows its team's
KEY_STORE_MODES = [(TEAM_STORE_MODE, "The team's"), *StoreMode.choices]
KEY_PREFIX = "pgk_"  # every key starts with it, so a leaked one is easy to recognise and scan for


class ApiKey(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=120)
    # The first characters of the secret ("pgk_Ab3dE9"), shown to tell keys apart; not secret.
    prefix = models.CharField(max_length=16)
    secret_sha256 = models.CharField(max_length=64, unique=True, editable=False)
    # The connection its requests go to; a key whose connection was deleted is refused.
    connection = models.ForeignKey(ProviderConnection, null=True, on_delete=models.SET_NULL, related_name="+")
    # Its requests follow the team's routing policy (Team -> Routing, issue 35), `connection` being
    # where a request that no rule matches goes; False: every request goes to `connection`.
    follows_policy = models.BooleanField(default=False, db_default=False)
    # What its requests' records keep of their text (`accounts.StoreMode`), or "" for the team's.
    # Keys made before issue 37 follow the team (migration usage 0025); new ones are redacted.
    store_mode = models.CharField(
        max_length=10,
        choices=KEY_STORE_MODES,
        blank=True,
        default=StoreMode.REDACTED,
        db_default=StoreMode.REDACTED,
    )
    # Model ids of that connection the key may call; empty: every model the connection serves.
    allowed_models = models.JSONField(default=list, blank=True)
    monthly_budget_usd = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    tokens_per_minute = models.PositiveIntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # The member who created it: their member budget applies to the key's requests too, and
    # the records name them as the user.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Written at most once a minute per key (`LAST_USED_EVERY`), not on every request.
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["team", "-created_at"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="unique_api_key_name_per_team")]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
