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
from tests.teams.conftest import Crew, signed_in

TOKEN = "sk-canary-token-1234abcd"


def create(crew: Crew, base_url: str, **extra: str) -> object:
    body = {"kind": "openai-compatible", "name": "Gateway", "base_url": base_url, "token": TOKEN, **extra}
    return signed_in(crew.admin).post(f"/teams/{crew.team.pk}/connections/new/", body)


def test_the_form_asks_only_for_what_the_kind_needs(crew: Crew) -> None:
    client = signed_in(crew.admin)
    workers = client.get(f"/teams/{crew.team.pk}/connections/new/?kind=workers-ai").content.decode()
    openai = client.get(f"/teams/{crew.team.pk}/connections/new/?kind=openai-compatible").content.decode()

    assert 'name="account_id"' in workers and 'name="account_id"' not in openai
    assert 'name="token"' in workers and 'name="token"' in openai


def test_a_token_is_write_only_and_shown_as_its_last_four(crew: Crew, fake_upstream: FakeUpstream) -> None:
    create(crew, fake_upstream.url + "/v1")
    connection = ProviderConnection.objects.get(name="Gateway")

    page = signed_in(crew.admin).get(f"/teams/{crew.team.pk}/connections/").content.decode()
    form = signed_in(crew.admin).get(f"/teams/{crew.team.pk}/connections/{connection.pk}/").content.decode()

    assert TOKEN not in page and TOKEN not in form
    assert "••••abcd" in page and "ending in abcd" in form
    event = AuditEvent.objects.get(action=AuditAction.CONNECTION_CREATED)
    assert TOKEN not in str(event.detail) and event.detail["token"] == "replaced"


def test_changing_the_base_url_clears_the_token(crew: Crew, fake_upstream: FakeUpstream) -> None:
    create(crew, fake_upstream.url + "/v1")
    connection = ProviderConnection.objects.get(name="Gateway")

    signed_in(crew.admin).post(
        f"/teams/{crew.team.pk}/connections/{connection.pk}/",
        {"name": "Gateway", "base_url": fake_upstream.url + "/other"},
    )

    connection.refresh_from_db()
    assert connection.base_url.endswith("/other") and not connection.has_token


def test_an_edit_without_a_token_keeps_it(crew: Crew, fake_upstream: FakeUpstream) -> None:
    create(crew, fake_upstream.url + "/v1")
    connection = ProviderConnection.objects.get(name="Gateway")

    signed_in(crew.admin).post(
        f"/teams/{crew.team.pk}/connections/{connection.pk}/",
        {"name": "Renamed", "base_url": connection.base_url},
    )

    connection.refresh_from_db()
    assert connection.name == "Renamed" and connection_token(connection=connection) == TOKEN


def test_an_internal_base_url_is_refused_by_the_ssrf_policy(crew: Crew) -> None:
    response = create(crew, "http://10.0.0.7/v1")

    assert response.status_code == 400  # type: ignore[attr-defined]
    assert "internal address" in response.content.decode()  # type: ignore[attr-defined]
    assert not ProviderConnection.objects.filter(name="Gateway").exists()


def test_testing_a_connection_lists_its_models_and_latency(crew: Crew, fake_upstream: FakeUpstream) -> None:
    create(crew, fake_upstream.url + "/v1")
    connection = ProviderConnection.objects.get(name="Gateway")
    fake_upstream.script(json_reply({"object": "list", "data": [{"id": "model-b"}, {"id": "model-a"}]}))

    page = (
        signed_in(crew.admin)
        .post(f"/teams/{crew.team.pk}/connections/{connection.pk}/test/")
        .content.decode()
    )

    request = fake_upstream.requests[0]
    assert (request.method, request.path) == ("GET", "/v1/models")
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert "Connected" in page and " ms" in page and "model-a" in page and "model-b" in page


def test_a_failed_test_shows_the_upstream_error_redacted(crew: Crew, fake_upstream: FakeUpstream) -> None:
    create(crew, fake_upstream.url + "/v1")
    connection = ProviderConnection.objects.get(name="Gateway")
    echoed = {"error": {"message": f"Invalid key {TOKEN}", "type": "invalid_api_key"}}
    fake_upstream.script(error(401, body=echoed))

    page = (
        signed_in(crew.admin)
        .post(f"/teams/{crew.team.pk}/connections/{connection.pk}/test/")
        .content.decode()
    )

    assert "Failed" in page and "401" in page and "Invalid key" in page
    assert TOKEN not in page and "[redacted]" in page


def test_workers_ai_connections_list_models_from_the_account(crew: Crew, fake_upstream: FakeUpstream) -> None:
    signed_in(crew.admin).post(
        f"/teams/{crew.team.pk}/connections/new/",
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
        signed_in(crew.admin)
        .post(f"/teams/{crew.team.pk}/connections/{connection.pk}/test/")
        .content.decode()
    )

    assert fake_upstream.requests[0].path == "/client/v4/accounts/acct123/ai/models/search"
    assert "@cf/moonshotai/kimi-k2.6" in page


def test_deleting_a_connection_is_audited(crew: Crew, fake_upstream: FakeUpstream) -> None:
    create(crew, fake_upstream.url + "/v1")
    connection = ProviderConnection.objects.get(name="Gateway")

    signed_in(crew.owner).post(f"/teams/{crew.team.pk}/connections/{connection.pk}/delete/")

    assert not ProviderConnection.objects.filter(pk=connection.pk).exists()
    assert AuditEvent.objects.filter(
        action=AuditAction.CONNECTION_DELETED, target="Gateway", actor=crew.owner
    ).exists()


def test_the_engine_connection_cannot_be_deleted_from_the_page(crew: Crew) -> None:
    engine = connection_engine_ensure(team=crew.team)

    response = signed_in(crew.owner).post(
        f"/teams/{crew.team.pk}/connections/{engine.pk}/delete/", follow=True
    )

    assert "is the team&#x27;s own and cannot be deleted" in response.content.decode()
    assert ProviderConnection.objects.filter(pk=engine.pk).exists()


def test_connection_delete_refuses_the_engine_connection_even_when_called_directly(crew: Crew) -> None:
    engine = connection_engine_ensure(team=crew.team)

    with pytest.raises(ValidationError, match="cannot be deleted"):
        connection_delete(actor=crew.membership(crew.owner), connection=engine)

    assert ProviderConnection.objects.filter(pk=engine.pk).exists()
    assert not AuditEvent.objects.filter(action=AuditAction.CONNECTION_DELETED).exists()
