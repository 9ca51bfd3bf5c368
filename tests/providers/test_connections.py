from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.secrets import REDACTED, redact, token_decrypt, token_encrypt, token_last4
from playground.providers.services import connection_engine_ensure, connection_save, connection_token
from playground.providers.urls_policy import base_url_validate

TOKEN = "cf-token-0123456789abcdefghijklmnopqrstuv"


def workers_ai(actors: Any, **fields: Any) -> ProviderConnection:
    return ProviderConnection(
        team=actors.team, name="Cloudflare", kind=ConnectionKind.WORKERS_AI, account_id="acc1", **fields
    )


@pytest.mark.django_db
def test_tokens_are_encrypted_at_rest_and_only_the_last_four_characters_are_kept(actors: Any) -> None:
    connection = connection_save(connection=workers_ai(actors), token=TOKEN)

    stored = ProviderConnection.objects.get(pk=connection.pk)
    assert TOKEN not in stored.token_ciphertext
    assert stored.token_last4 == "stuv"
    assert connection_token(connection=stored) == TOKEN


def test_short_tokens_show_no_characters_at_all() -> None:
    assert token_last4("abc123") == ""


def test_a_token_encrypted_under_the_previous_key_still_decrypts(settings: Any) -> None:
    settings.FIELD_ENCRYPTION_KEY = "old-key"
    ciphertext = token_encrypt(TOKEN)
    settings.FIELD_ENCRYPTION_KEY = "new-key"
    settings.FIELD_ENCRYPTION_KEY_PREVIOUS = ["old-key"]

    assert token_decrypt(ciphertext) == TOKEN


@pytest.mark.django_db
def test_changing_the_base_url_clears_the_stored_token(actors: Any) -> None:
    connection = connection_save(connection=workers_ai(actors), token=TOKEN)

    connection.base_url = "https://1.1.1.1/client/v4"
    connection_save(connection=connection, previous_base_url="")

    stored = ProviderConnection.objects.get(pk=connection.pk)
    assert stored.token_ciphertext == "" and stored.token_last4 == ""


@pytest.mark.django_db
def test_a_new_token_given_with_a_new_base_url_is_kept(actors: Any) -> None:
    connection = connection_save(connection=workers_ai(actors), token=TOKEN)

    connection.base_url = "https://1.1.1.1/client/v4"
    connection_save(connection=connection, token="another-token-abcdefgh", previous_base_url="")

    assert (
        connection_token(connection=ProviderConnection.objects.get(pk=connection.pk))
        == "another-token-abcdefgh"
    )


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/",
        "file:///etc/passwd",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.5/v1",
        "http://192.168.1.1/v1",
        "http://[::1]:8080/v1",
        "http://[::ffff:127.0.0.1]/v1",
        "http://0.0.0.0/v1",
        "https://user:secret@example.com/v1",
    ],
)
def test_base_urls_that_could_reach_inside_are_refused(url: str, settings: Any) -> None:
    settings.PROVIDER_HOST_ALLOWLIST = []

    with pytest.raises(ValidationError):
        base_url_validate(url)


def test_a_loopback_host_is_refused_unless_allow_listed(settings: Any) -> None:
    settings.PROVIDER_HOST_ALLOWLIST = []
    with pytest.raises(ValidationError, match="internal address"):
        base_url_validate("http://127.0.0.1:9000/v1")

    settings.PROVIDER_HOST_ALLOWLIST = ["127.0.0.0/8"]
    base_url_validate("http://127.0.0.1:9000/v1")


def test_the_engines_own_address_is_allowed(settings: Any) -> None:
    settings.PROVIDER_HOST_ALLOWLIST = []
    settings.ENGINE_URL = "http://127.0.0.1:8788"

    base_url_validate("http://127.0.0.1:8788/client/v4")


def test_a_public_ip_is_allowed(settings: Any) -> None:
    settings.PROVIDER_HOST_ALLOWLIST = []

    base_url_validate("https://1.1.1.1/client/v4")


@pytest.mark.django_db
def test_an_openai_compatible_connection_needs_a_base_url(actors: Any) -> None:
    connection = ProviderConnection(team=actors.team, name="vLLM", kind=ConnectionKind.OPENAI_COMPATIBLE)

    with pytest.raises(ValidationError, match="base URL"):
        connection_save(connection=connection, token="k")


@pytest.mark.django_db
def test_every_team_gets_one_default_engine_connection(actors: Any) -> None:
    first = connection_engine_ensure(team=actors.team)
    second = connection_engine_ensure(team=actors.team)

    assert first.pk == second.pk
    assert first.is_default and first.kind == ConnectionKind.ENGINE


def test_redaction_removes_known_secrets_and_credential_shaped_text() -> None:
    text = f"bad token {TOKEN}; header was Bearer abcdefghijkl123; key sk-proj-abcdefghijkl"

    redacted = redact(text, [TOKEN])

    assert TOKEN not in redacted and "abcdefghijkl123" not in redacted and "sk-proj" not in redacted
    assert redacted.count(REDACTED) == 3


def test_a_host_that_does_not_resolve_is_refused_with_a_clear_message(settings: Any) -> None:
    settings.PROVIDER_HOST_ALLOWLIST = []

    with pytest.raises(ValidationError, match="cannot be resolved"):
        base_url_validate("https://no-such-host.invalid/v1")
