"""Connections on the team pages: a form per kind, write-only tokens, the SSRF policy,
and "Test connection" through the HTTP seam against a loopback fake upstream."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from playground.accounts.models import AuditAction, AuditEvent
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_engine_ensure, connection_token
from playground.teams.services.connections import connection_delete
from tests.fakes.upstream import FakeUpstream, error, json_reply
from tests.support.actors import Actors
from tests.support.clients import client_for

TOKEN = "sk-canary-token-1234abcd"


def create(actors: Actors, base_url: str, **extra: str) -> object:
    body = {"kind": "openai-compatible", "name": "Gateway", "base_url": base_url, "token": TOKEN, **extra}
    return client_for(actors.admin).post(f"/teams/{actors.team.pk}/connections/new/", body)


def test_the_form_asks_only_for_what_the_kind_needs(actors: Actors) -> None:
    client = client_for(actors.admin)
    workers = client.get(f"/teams/{actors.team.pk}/connections/new/?kind=workers-ai").content.decode()
    openai = client.get(f"/teams/{actors.team.pk}/connections/new/?kind=openai-compatible").content.decode()

    assert 'name="account_id"' in workers and 'name="account_id"' not in openai
    assert 'name="token"' in workers and 'name="token"' in openai


def test_a_token_is_write_only_and_shown_as_its_last_four(
    actors: Actors, fake_upstream: FakeUpstream
) -> None:
    create(actors, fake_upstream.url + "/v1")
    connection = ProviderConnection.objects.get(name="Gateway")

    page = client_for(actors.admin).get(f"/teams/{actors.team.pk}/connections/").content.decode()
    form = (
        client_for(actors.admin).get(f"/teams/{actors.team.pk}/connections/{connection.pk}/").content.decode()
    )

    assert TOKEN not in page and TOKEN not in form
    assert "••••abcd" in page and "ending in abcd" in form
    event = AuditEvent.objects.get(action=AuditAction.CONNECTION_CREATED)
    assert TOKEN not in str(event.detail) and event.detail["token"] == "replaced"


def test_changing_the_base_url_clears_the_token(actors: Actors, fake_upstream: FakeUpstream) -> None:
    create(actors, fake_upstream.url + "/v1")
    connection = ProviderConnection.objects.get(name="Gateway")

    client_for(actors.admin).post(
        f"/teams/{actors.team.pk}/connections/{connection.pk}/",
        {"name": "Gateway", "base_url": fake_upstream.url + "/other"},
    )

    connection.refresh_from_db()
    assert connection.base_url.endswith("/other") and not connection.has_token


def test_an_edit_without_a_token_keeps_it(actors: Actors, fake_upstream: FakeUpstream) -> None:
    create(actors, fake_upstream.url + "/v1")
    connection = ProviderConnection.objects.get(name="Gateway")

    client_for(actors.admin).post(
        f"/teams/{actors.team.pk}/connections/{connection.pk}/",
        {"name": "Renamed", "base_url": connection.base_url},
    )

    connection.refresh_from_db()
    assert connection.name == "Renamed" and connection_token(connection=connection) == TOKEN


def test_an_internal_base_url_is_refused_by_the_ssrf_policy(actors: Actors) -> None:
    response = create(actors, "http://10.0.0.7/v1")

    assert response.status_code == 400  # type: ignore[attr-defined]
    assert "internal address" in response.content.decode()  # type: ignore[attr-defined]
    assert not ProviderConnection.objects.filter(name="Gateway").exists()


def test_testing_a_connection_lists_its_models_and_latency(
    actors: Actors, fake_upstream: FakeUpstream
) -> None:
    create(actors, fake_upstream.url + "/v1")
    connection = ProviderConnection.objects.get(name="Gateway")
    fake_upstream.script(json_reply({"object": "list", "data": [{"id": "model-b"}, {"id": "model-a"}]}))

    page = (
        client_for(actors.admin)
        .post(f"/teams/{actors.team.pk}/connections/{connection.pk}/test/")
        .content.decode()
    )

    request = fake_upstream.requests[0]
    assert (request.method, request.path) == ("GET", "/v1/models")
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert "Connected" in page and " ms" in page and "model-a" in page and "model-b" in page


def test_a_failed_test_shows_the_upstream_error_redacted(actors: Actors, fake_upstream: FakeUpstream) -> None:
    create(actors, fake_upstream.url + "/v1")
    connection = ProviderConnection.objects.get(name="Gateway")
    echoed = {"error": {"message": f"Invalid key {TOKEN}", "type": "invalid_api_key"}}
    fake_upstream.script(error(401, body=echoed))

    page = (
        client_for(actors.admin)
        .post(f"/teams/{actors.team.pk}/connections/{connection.pk}/test/")
        .content.decode()
    )

    assert "Failed" in page and "401" in page and "Invalid key" in page
    assert TOKEN not in page and "[redacted]" in page


def test_workers_ai_connections_list_models_from_the_account(
    actors: Actors, fake_upstream: FakeUpstream
) -> None:
    client_for(actors.admin).post(
        f"/teams/{actors.team.pk}/connections/new/",
        {
            "kind": "workers-ai",
            "name": "Cloudflare",
            "base_url": fake_upstream.workers_base_url,
            "account_id": "acct123",
            "token": TOKEN,
        },
    )
    connection = ProviderConnection.objects.get(name="Cloudflare")
    fake_upstream.script(
        json_reply({"success": True, "errors": [], "result": [{"name": "@cf/moonshotai/kimi-k2.6"}]})
    )

    page = (
        client_for(actors.admin)
        .post(f"/teams/{actors.team.pk}/connections/{connection.pk}/test/")
        .content.decode()
    )

    assert fake_upstream.requests[0].path == "/client/v4/accounts/acct123/ai/models/search"
    assert "@cf/moonshotai/kimi-k2.6" in page


def test_deleting_a_connection_is_audited(actors: Actors, fake_upstream: FakeUpstream) -> None:
    create(actors, fake_upstream.url + "/v1")
    connection = ProviderConnection.objects.get(name="Gateway")

    client_for(actors.owner).post(f"/teams/{actors.team.pk}/connections/{connection.pk}/delete/")

    assert not ProviderConnection.objects.filter(pk=connection.pk).exists()
    assert AuditEvent.objects.filter(
        action=AuditAction.CONNECTION_DELETED, target="Gateway", actor=actors.owner
    ).exists()


def test_the_engine_connection_cannot_be_deleted_from_the_page(actors: Actors) -> None:
    engine = connection_engine_ensure(team=actors.team)

    response = client_for(actors.owner).post(
        f"/teams/{actors.team.pk}/connections/{engine.pk}/delete/", follow=True
    )

    assert "is the team&#x27;s own and cannot be deleted" in response.content.decode()
    assert ProviderConnection.objects.filter(pk=engine.pk).exists()


def test_connection_delete_refuses_the_engine_connection_even_when_called_directly(actors: Actors) -> None:
    engine = connection_engine_ensure(team=actors.team)

    with pytest.raises(ValidationError, match="cannot be deleted"):
        connection_delete(actor=actors.membership(actors.owner), connection=engine)

    assert ProviderConnection.objects.filter(pk=engine.pk).exists()
    assert not AuditEvent.objects.filter(action=AuditAction.CONNECTION_DELETED).exists()
