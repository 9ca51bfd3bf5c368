from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from playground.accounts.admin_scope import TeamScopedAdmin
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_save, connection_settings_validate


class ConnectionForm(forms.ModelForm):
    token = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted and never shown again. Leave blank to keep the current token; "
        "changing the base URL clears it unless you enter it again.",
    )
    clear_token = forms.BooleanField(required=False, help_text="Remove the stored token.")

    class Meta:
        model = ProviderConnection
        fields = ["team", "name", "kind", "base_url", "account_id", "is_default"]

    def _post_clean(self) -> None:
        super()._post_clean()  # type: ignore[misc]  # copies the cleaned fields onto the instance
        try:
            connection_settings_validate(connection=self.instance)
        except ValidationError as exc:
            self._update_errors(exc)  # type: ignore[attr-defined]


@admin.register(ProviderConnection)
class ProviderConnectionAdmin(TeamScopedAdmin):
    form = ConnectionForm
    list_display = ["name", "team", "kind", "base_url", "token_hint", "is_default"]
    list_filter = ["kind"]
    readonly_fields = ["token_hint"]

    @admin.display(description="Token")
    def token_hint(self, connection: ProviderConnection) -> str:
        if not connection.has_token:
            return "none"
        return f"••••{connection.token_last4}" if connection.token_last4 else "set"

    def save_model(self, request: HttpRequest, obj: ProviderConnection, form: Any, change: bool) -> None:
        previous = form.initial.get("base_url", "") if change else None
        token = form.cleaned_data.get("token") or None
        if form.cleaned_data.get("clear_token"):
            token = ""
        connection_save(connection=obj, token=token, previous_base_url=previous)
