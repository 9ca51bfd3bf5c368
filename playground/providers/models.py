"""A team's connections to upstream providers. Tokens are encrypted at rest."""

from __future__ import annotations

from django.db import models

from playground.accounts.models import Team
from playground.providers.kinds import ConnectionKind, KindSpec, kind_spec

__all__ = ["ConnectionKind", "ProviderConnection"]


class ProviderConnection(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="connections")
    name = models.CharField(max_length=120)
    kind = models.CharField(max_length=20, choices=ConnectionKind.choices)
    base_url = models.URLField(max_length=300, blank=True, help_text="Blank: the kind's default")
    account_id = models.CharField(max_length=64, blank=True, help_text="Workers AI account id")
    # Fernet ciphertext; read and written only through playground.providers.secrets.
    token_ciphertext = models.TextField(blank=True, editable=False)
    token_last4 = models.CharField(max_length=4, blank=True, editable=False)
    is_default = models.BooleanField(default=False)
    # The model ids the provider listed at its last successful "Test connection" (None: never
    # listed): a new conversation must name one of them (`connection_check.connection_model_check`).
    listed_models = models.JSONField(null=True, blank=True, editable=False)
    # The context windows that listing stated, in tokens by model id ({} or None: it stated none):
    # they win over the catalogue's (`context_windows.context_window_for`).
    listed_windows = models.JSONField(null=True, blank=True, editable=False)
    models_listed_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team", "name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="unique_connection_name_per_team")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"

    @property
    def spec(self) -> KindSpec:
        return kind_spec(self.kind)

    @property
    def has_token(self) -> bool:
        return bool(self.token_ciphertext)
