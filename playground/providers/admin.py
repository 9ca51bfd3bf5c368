"""Connections in the (superuser-only) admin, read-only.

They are created, edited, tested and deleted on the team pages, where the kind's form, the
write-only token and the audit log apply; here a superuser only looks across teams.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from playground.providers.models import ProviderConnection


@admin.register(ProviderConnection)
class ProviderConnectionAdmin(admin.ModelAdmin[ProviderConnection]):
    list_display = ["name", "team", "kind", "base_url", "token_hint", "is_default"]
    list_filter = ["kind"]
    fields = readonly_fields = ("team", "name", "kind", "base_url", "account_id", "is_default", "token_hint")

    @admin.display(description="Token")
    def token_hint(self, connection: ProviderConnection) -> str:
        if not connection.has_token:
            return "none"
        return f"••••{connection.token_last4}" if connection.token_last4 else "set"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
