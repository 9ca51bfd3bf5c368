"""The password form, which tells an account that signs in through the provider to use its button."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from playground.teams.sso.discovery import sso_enabled


class LoginForm(AuthenticationForm):
    def clean(self) -> dict[str, Any]:
        try:
            return super().clean()
        except ValidationError:
            # Only after the password failed (the failure is counted by the login limits as any other).
            if sso_enabled() and self._signs_in_through_provider():
                raise ValidationError(
                    f"This account signs in with {settings.OIDC_PROVIDER_NAME}, not a password here: "
                    f"use the “Sign in with {settings.OIDC_PROVIDER_NAME}” button.",
                    code="sso_only",
                ) from None
            raise

    def _signs_in_through_provider(self) -> bool:
        username = self.cleaned_data.get("username")
        user = User.objects.filter(username=username).first() if username else None
        return user is not None and not user.has_usable_password()
