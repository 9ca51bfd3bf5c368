"""The API keys pages: the list every member reads, the form owners and admins use, the secret
shown once after the redirect, htmx's models field and revoke row, and their plain fallbacks."""

from __future__ import annotations

import datetime as dt
import logging
import re
from decimal import Decimal

import pytest
from django.conf import settings
from django.utils import timezone

from playground.accounts.models import AuditEvent
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_engine_ensure, connection_models_store
from playground.usage.api_keys import api_key_issue
from playground.usage.models import ApiKey, UsageRecord, UsageStatus
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db

SECRET = re.compile(r'value="(pgk_[\w-]+)"')
HTMX = {"HX-Request": "true"}


def keys_url(actors: Actors, tail: str = "") -> str:
    return f"/teams/{actors.team.pk}/api-keys/{tail}"


def test_the_secret_is_shown_once_after_the_redirect_and_never_in_a_url_or_a_log(
    actors: Actors, workers_connection: ProviderConnection, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    owner = client_for(actors.owner)

    response = owner.post(
        keys_url(actors, "new/"),
        {"name": "billing-agent", "connection": workers_connection.pk, "monthly_budget_usd": "5"},
    )
    assert response.status_code == 302 and response["Location"] == keys_url(actors)
    page = owner.get(response["Location"]).content.decode()
    match = SECRET.search(page)
    assert match, "the page after the redirect shows the key"
    secret = match.group(1)
    assert 'data-copy="new-key-secret"' in page
    assert "curl -sS http://testserver/v1/chat/completions" in page
    assert "Authorization: Bearer $PLAYGROUND_API_KEY" in page
    assert f'<code class="small">{secret[:10]}…</code>' in page

    again = owner.get(keys_url(actors)).content.decode()
    assert secret not in again and "new-key-secret" not in again, "shown once"
    assert "billing-agent" in again
    assert ApiKey.objects.count() == 1
    assert secret not in caplog.text


def test_the_first_snippet_of_a_key_on_the_engine_names_its_default_instruct_model(
    actors: Actors, catalogue: None
) -> None:
    """Not the pretrained model that sorts first by name: a newcomer's first paste gets an answer."""
    engine = connection_engine_ensure(team=actors.team)
    owner = client_for(actors.owner)

    response = owner.post(keys_url(actors, "new/"), {"name": "first", "connection": engine.pk})
    page = owner.get(response["Location"]).content.decode()

    assert settings.ENGINE_MODEL_ID == "@local/smollm2-135m-instruct"
    assert f"&quot;model&quot;: &quot;{settings.ENGINE_MODEL_ID}&quot;" in page
    assert "curl -sS http://testserver/v1/chat/completions" in page


def test_a_refused_key_shows_the_form_again_with_the_reason_and_makes_nothing(
    actors: Actors, openai_connection: ProviderConnection
) -> None:
    connection_models_store(connection=openai_connection, models=["served/a", "served/b"])
    owner = client_for(actors.owner)

    response = owner.post(
        keys_url(actors, "new/"),
        {"name": "agent", "connection": openai_connection.pk, "other_models": "served/a, served/z"},
    )

    assert response.status_code == 400
    page = response.content.decode()
    assert "Gateway does not serve served/z" in page
    assert 'value="served/a"' in page and 'value="served/b"' in page, "the connection's models to tick"
    assert not ApiKey.objects.exists()


def test_members_read_the_list_without_any_action_and_may_not_open_the_form(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    key, _secret = api_key_issue(
        team_id=actors.team.pk,
        name="billing-agent",
        connection_id=workers_connection.pk,
        created_by_id=actors.admin.pk,
        monthly_budget_usd=Decimal(5),
        requests_per_minute=60,
        tokens_per_minute=20000,
    )
    UsageRecord.objects.create(
        team=actors.team, api_key=key, model_id="m", status=UsageStatus.OK, total_cost=Decimal("0.42")
    )
    teammate = client_for(actors.teammate)

    page = teammate.get(keys_url(actors)).content.decode()

    assert "billing-agent" in page and f"{key.prefix}…" in page
    assert "$0.42" in page and "of $5.00" in page
    assert "<div>60 requests/min</div><div>20,000 tokens/min</div>" in page
    assert "Workers AI (fake)" in page and "all its models" in page
    assert ">Active<" in page and ">admin<" in page
    assert "/api-keys/new/" not in page and "/revoke/" not in page and f"/api-keys/{key.pk}/" not in page
    assert teammate.get(keys_url(actors, "new/")).status_code == 403


def test_changing_the_connection_swaps_in_its_models_field_over_htmx(
    actors: Actors, workers_connection: ProviderConnection, openai_connection: ProviderConnection
) -> None:
    connection_models_store(connection=openai_connection, models=["served/a", "served/b"])
    owner = client_for(actors.owner)

    fragment = owner.get(
        keys_url(actors, "new/"),
        {"connection": openai_connection.pk},
        headers={**HTMX, "HX-Trigger-Name": "connection"},
    ).content.decode()
    page = owner.get(keys_url(actors, "new/"), {"connection": openai_connection.pk}).content.decode()

    assert fragment.lstrip().startswith('<fieldset class="field key-models-field" id="key-models">')
    assert "<html" not in fragment and 'value="served/a"' in fragment
    assert "The models Gateway listed at its last test." in fragment
    assert "<html" in page and 'value="served/b"' in page, "without htmx, the whole form for that connection"
    assert f'<option value="{openai_connection.pk}" selected>' in page


def test_an_edit_saves_the_new_settings_and_keeps_the_key(
    actors: Actors, workers_connection: ProviderConnection, openai_connection: ProviderConnection
) -> None:
    key, secret = api_key_issue(
        team_id=actors.team.pk, name="agent", connection_id=workers_connection.pk, created_by_id=None
    )
    owner = client_for(actors.owner)
    form = owner.get(keys_url(actors, f"{key.pk}/")).content.decode()
    assert 'value="agent"' in form and "Save key" in form

    response = owner.post(
        keys_url(actors, f"{key.pk}/"),
        {
            "name": "agent-2",
            "connection": openai_connection.pk,
            "other_models": "gpt-4.1-mini",
            "requests_per_minute": "30",
            "expires_at": "2099-01-31T12:00",
        },
    )

    assert response.status_code == 302
    key.refresh_from_db()
    assert (key.name, key.connection_id, key.allowed_models, key.requests_per_minute) == (
        "agent-2",
        openai_connection.pk,
        ["gpt-4.1-mini"],
        30,
    )
    assert key.expires_at is not None and key.expires_at.isoformat() == "2099-01-31T12:00:00+00:00"
    assert ApiKey.objects.get(secret_sha256=key.secret_sha256).pk == key.pk and secret


def test_saving_an_expired_key_without_touching_its_expiry_keeps_it_to_the_second(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    expired = (timezone.now() - dt.timedelta(days=2)).replace(second=42, microsecond=123456)
    key, _secret = api_key_issue(
        team_id=actors.team.pk,
        name="agent",
        connection_id=workers_connection.pk,
        created_by_id=None,
        expires_at=expired,
    )
    owner = client_for(actors.owner)
    shown = re.search(
        r'name="expires_at" value="([^"]+)"', owner.get(keys_url(actors, f"{key.pk}/")).content.decode()
    )
    assert shown, "the form shows the expiry"

    response = owner.post(
        keys_url(actors, f"{key.pk}/"),
        {"name": "agent-renamed", "connection": workers_connection.pk, "expires_at": shown.group(1)},
    )

    assert response.status_code == 302
    key.refresh_from_db()
    assert (key.name, key.expires_at) == ("agent-renamed", expired)
    assert AuditEvent.objects.get().detail == {"name": "agent-renamed", "previous": {"name": "agent"}}


def test_revoking_over_htmx_answers_with_the_revoked_row(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    key, _secret = api_key_issue(
        team_id=actors.team.pk, name="agent", connection_id=workers_connection.pk, created_by_id=None
    )

    response = client_for(actors.admin).post(keys_url(actors, f"{key.pk}/revoke/"), headers=HTMX)

    row = response.content.decode()
    assert response.status_code == 200
    assert row.lstrip().startswith(f'<tr id="key-{key.pk}" class="key-inactive">')
    assert ">Revoked<" in row and "Revoke</button>" not in row
    key.refresh_from_db()
    assert key.revoked_at is not None and key.revoked_at <= timezone.now()


def test_revoking_without_htmx_redirects_with_a_message_and_a_second_revoke_is_refused(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    key, _secret = api_key_issue(
        team_id=actors.team.pk, name="agent", connection_id=workers_connection.pk, created_by_id=None
    )
    admin = client_for(actors.admin)

    first = admin.post(keys_url(actors, f"{key.pk}/revoke/"), follow=True)
    second = admin.post(keys_url(actors, f"{key.pk}/revoke/"), headers=HTMX)

    assert "Revoked agent: its next request is refused." in first.content.decode()
    assert second.status_code == 200 and second["HX-Redirect"] == keys_url(actors)
    assert "already revoked" in admin.get(keys_url(actors)).content.decode()


def test_another_teams_key_does_not_exist_here(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    key, _secret = api_key_issue(
        team_id=actors.team.pk, name="agent", connection_id=workers_connection.pk, created_by_id=None
    )
    outsider = client_for(actors.outsider)
    bravo = f"/teams/{actors.other_team.pk}/api-keys/{key.pk}/"

    assert outsider.get(bravo).status_code == 404
    assert outsider.post(bravo + "revoke/").status_code == 404
    assert outsider.get(keys_url(actors)).status_code == 404
