from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.services import connection_save

pytestmark = pytest.mark.django_db

TOKEN = "secret-token-abcdefghijklmnop"


@pytest.fixture
def connections(actors: Any) -> tuple[ProviderConnection, ProviderConnection]:
    for user in (actors.owner, actors.teammate, actors.outsider):
        user.is_staff = True
        user.save()
    ours = connection_save(
        connection=ProviderConnection(
            team=actors.team, name="Ours", kind=ConnectionKind.WORKERS_AI, account_id="a1"
        ),
        token=TOKEN,
    )
    theirs = connection_save(
        connection=ProviderConnection(
            team=actors.other_team, name="Theirs", kind=ConnectionKind.WORKERS_AI, account_id="b2"
        ),
        token="their-token-abcdefghijk",
    )
    return ours, theirs


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_owner_sees_their_teams_connections_masked(actors: Any, connections: Any) -> None:
    page = logged_in(actors.owner).get("/admin/providers/providerconnection/")

    assert page.status_code == 200
    html = page.content.decode()
    assert "Ours" in html and "Theirs" not in html
    assert "••••mnop" in html and TOKEN not in html


def test_the_edit_page_never_renders_the_token(actors: Any, connections: Any) -> None:
    ours, _ = connections

    page = logged_in(actors.owner).get(f"/admin/providers/providerconnection/{ours.pk}/change/")

    assert page.status_code == 200
    assert TOKEN not in page.content.decode()
    assert ours.token_ciphertext not in page.content.decode()


def test_another_teams_connection_is_not_found_in_the_admin(actors: Any, connections: Any) -> None:
    _, theirs = connections

    page = logged_in(actors.owner).get(f"/admin/providers/providerconnection/{theirs.pk}/change/")

    assert page.status_code == 302  # the admin redirects a missing object to its list
    assert "Theirs" not in logged_in(actors.owner).get(page["Location"]).content.decode()


def test_a_plain_member_cannot_manage_connections(actors: Any, connections: Any) -> None:
    page = logged_in(actors.teammate).get("/admin/providers/providerconnection/")

    assert page.status_code == 403


def test_editing_the_base_url_in_the_admin_clears_the_token(actors: Any, connections: Any) -> None:
    ours, _ = connections

    response = logged_in(actors.owner).post(
        f"/admin/providers/providerconnection/{ours.pk}/change/",
        {
            "team": actors.team.pk,
            "name": "Ours",
            "kind": ConnectionKind.WORKERS_AI,
            "base_url": "https://1.1.1.1/client/v4",
            "account_id": "a1",
        },
    )

    assert response.status_code == 302
    ours.refresh_from_db()
    assert ours.base_url == "https://1.1.1.1/client/v4"
    assert ours.token_ciphertext == ""


def test_the_admin_refuses_a_base_url_pointing_inside(actors: Any, connections: Any, settings: Any) -> None:
    ours, _ = connections
    settings.PROVIDER_HOST_ALLOWLIST = []

    response = logged_in(actors.owner).post(
        f"/admin/providers/providerconnection/{ours.pk}/change/",
        {
            "team": actors.team.pk,
            "name": "Ours",
            "kind": ConnectionKind.WORKERS_AI,
            "base_url": "http://169.254.169.254/",
            "account_id": "a1",
        },
    )

    assert response.status_code == 200
    assert "internal address" in response.content.decode()
    ours.refresh_from_db()
    assert ours.base_url == ""
