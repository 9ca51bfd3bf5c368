"""Writes to provider connections. Tokens pass through here and `secrets` only."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from playground.accounts.models import Team
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.secrets import token_decrypt, token_encrypt, token_last4
from playground.providers.urls_policy import base_url_validate

ENGINE_CONNECTION_NAME = "Embedded engine"


def connection_token(*, connection: ProviderConnection) -> str:
    """The decrypted token, for the adapter that sends it; never render or log it."""
    return token_decrypt(connection.token_ciphertext) if connection.token_ciphertext else ""


def connection_save(
    *,
    connection: ProviderConnection,
    token: str | None = None,
    previous_base_url: str | None = None,
) -> ProviderConnection:
    """Validate and save; `token` replaces the stored one ("" clears it, None keeps it).

    A changed base URL clears the stored token unless a new one comes with the change:
    otherwise whoever may edit the URL could send the team's key to a host of their choice.
    """
    connection_settings_validate(connection=connection)
    url_changed = previous_base_url is not None and previous_base_url != connection.base_url
    if token is None and url_changed:
        token = ""
    if url_changed:  # another host may serve other models: test it again to list them
        connection.listed_models, connection.listed_windows, connection.models_listed_at = None, None, None
    if token is not None:
        connection.token_ciphertext = token_encrypt(token) if token else ""
        connection.token_last4 = token_last4(token)
    connection.full_clean(exclude=["token_ciphertext", "token_last4"])
    with transaction.atomic():
        if connection.is_default:
            ProviderConnection.objects.filter(team=connection.team, is_default=True).exclude(
                pk=connection.pk
            ).update(is_default=False)
        connection.save()
    return connection


def connection_models_store(
    *, connection: ProviderConnection, models: list[str], windows: dict[str, int] | None = None
) -> None:
    """Keep the model ids a connection test listed (new conversations are checked against them)
    and the context windows it stated, if any (they win over the catalogue's)."""
    windows = windows or {}
    connection.listed_models, connection.listed_windows = models, windows
    connection.models_listed_at = timezone.now()
    ProviderConnection.objects.filter(pk=connection.pk).update(
        listed_models=models, listed_windows=windows, models_listed_at=connection.models_listed_at
    )


def connection_settings_validate(*, connection: ProviderConnection) -> None:
    """What each kind needs, and the base-URL policy; also run before every request."""
    spec = connection.spec
    if spec.needs_base_url and not connection.base_url:
        raise ValidationError({"base_url": f"A connection to an {spec.label} needs a base URL."})
    if spec.needs_account_id and not connection.account_id:
        raise ValidationError({"account_id": f"A {spec.label} connection needs the Cloudflare account id."})
    if connection.kind != ConnectionKind.ENGINE and connection.base_url:
        try:
            base_url_validate(connection.base_url)
        except ValidationError as exc:
            raise ValidationError({"base_url": exc.messages}) from exc


def engine_account_id(*, team_id: int) -> str:
    """The account id a team's requests carry to the embedded engine.

    The engine keeps prefix caches and batches apart per account id, so each team gets its
    own: no team can learn from `cached_tokens` which prompts another team sent.
    """
    return f"team-{team_id}"


def connection_engine_ensure(*, team: Team) -> ProviderConnection:
    """The team's connection to the embedded engine, created (as the default) if missing."""
    existing = ProviderConnection.objects.filter(team=team, kind=ConnectionKind.ENGINE).first()
    if existing is not None:
        return existing
    has_default = ProviderConnection.objects.filter(team=team, is_default=True).exists()
    return connection_save(
        connection=ProviderConnection(
            team=team, name=ENGINE_CONNECTION_NAME, kind=ConnectionKind.ENGINE, is_default=not has_default
        )
    )
