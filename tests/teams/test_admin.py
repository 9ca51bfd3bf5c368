"""The team admin (superusers only): a team added there gets the embedded engine, none is deleted."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from playground.accounts.models import Membership, Role, Team
from playground.providers.models import ConnectionKind, ProviderConnection
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def root() -> User:
    return User.objects.create_superuser("root", password="password-root")


def test_a_team_a_superuser_adds_gets_the_embedded_engine(root: User) -> None:
    response = client_for(root).post(
        "/admin/accounts/team/add/",
        {
            "name": "Charlie",
            "slug": "charlie",
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "0",
            "memberships-0-user": root.pk,
            "memberships-0-role": Role.OWNER,
        },
    )

    assert response.status_code == 302
    team = Team.objects.get(slug="charlie")
    assert Membership.objects.get(team=team).user == root
    assert ProviderConnection.objects.get(team=team).kind == ConnectionKind.ENGINE


def test_a_team_a_superuser_renames_keeps_its_one_engine_connection(actors: Actors, root: User) -> None:
    response = client_for(root).post(
        f"/admin/accounts/team/{actors.team.pk}/change/",
        {
            "name": "Alpha renamed",
            "slug": "alpha",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )

    assert response.status_code == 302
    actors.team.refresh_from_db()
    assert actors.team.name == "Alpha renamed"
    assert not ProviderConnection.objects.filter(team=actors.team).exists()  # only an added team gets one


def test_nobody_deletes_a_team_from_the_admin(actors: Actors, root: User) -> None:
    client = client_for(root)

    page = client.get(f"/admin/accounts/team/{actors.team.pk}/delete/")
    client.post(f"/admin/accounts/team/{actors.team.pk}/delete/", {"post": "yes"})
    client.post("/admin/accounts/team/", {"action": "delete_selected", "_selected_action": [actors.team.pk]})

    assert page.status_code == 403
    assert Team.objects.filter(pk=actors.team.pk).exists()
