"""The Django admin is for superusers only; team owners and admins use the team pages.

Per-team scoping (who sees and changes which team's members, connections, prices and
budgets) is tested on the team pages: tests/teams (the role matrix: outsider → 404).
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from playground.accounts.models import Membership, Role, Team
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.services import connection_save
from playground.usage.models import UsageRecord, UsageStatus
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db

TOKEN = "secret-token-abcdefghijklmnop"
ADMIN_PAGES = [
    "/admin/",
    "/admin/accounts/team/",
    "/admin/providers/providerconnection/",
    "/admin/usage/usagerecord/",
    "/admin/catalog/catalogmodel/",
]


@pytest.fixture
def root() -> User:
    return User.objects.create_superuser("root", password="password-root")


@pytest.fixture
def staff_team_admin(actors: Actors) -> User:
    """Staff and the team's admin: what opened a team-scoped admin before."""
    user = User.objects.create_user("team-admin", password="password-team-admin", is_staff=True)
    Membership.objects.create(team=actors.team, user=user, role=Role.ADMIN)
    return user


@pytest.fixture
def connection(actors: Actors) -> ProviderConnection:
    return connection_save(
        connection=ProviderConnection(
            team=actors.team, name="Ours", kind=ConnectionKind.WORKERS_AI, account_id="a1"
        ),
        token=TOKEN,
    )


@pytest.mark.parametrize("url", ADMIN_PAGES)
@pytest.mark.parametrize("who", ["owner", "team admin"])
def test_staff_who_are_not_superusers_are_sent_to_the_admin_login(
    actors: Actors, staff_team_admin: User, url: str, who: str
) -> None:
    user = staff_team_admin
    if who == "owner":
        User.objects.filter(pk=actors.owner.pk).update(is_staff=True)
        user = User.objects.get(pk=actors.owner.pk)

    response = client_for(user).get(url)

    assert response.status_code == 302
    assert response["Location"] == f"/admin/login/?next={url}"


def test_a_staff_owner_cannot_change_anything_through_the_admin(
    actors: Actors, connection: ProviderConnection
) -> None:
    User.objects.filter(pk=actors.owner.pk).update(is_staff=True)
    client = client_for(User.objects.get(pk=actors.owner.pk))

    renamed = client.post(f"/admin/accounts/team/{actors.team.pk}/change/", {"name": "Hijacked", "slug": "x"})
    added = client.post("/admin/accounts/team/add/", {"name": "New", "slug": "new"})

    assert (renamed.status_code, added.status_code) == (302, 302)
    assert renamed["Location"].startswith("/admin/login/")
    actors.team.refresh_from_db()
    assert actors.team.name == "Alpha"
    assert not Team.objects.filter(slug="new").exists()


def test_the_admin_login_page_tells_a_signed_in_non_superuser_they_are_not_allowed(actors: Actors) -> None:
    User.objects.filter(pk=actors.owner.pk).update(is_staff=True)

    page = client_for(User.objects.get(pk=actors.owner.pk)).get("/admin/login/?next=/admin/")

    assert page.status_code == 200
    assert "not authorized to access this page" in page.content.decode()


@pytest.mark.parametrize("url", ADMIN_PAGES)
def test_a_superuser_opens_the_admin(root: User, url: str) -> None:
    assert client_for(root).get(url).status_code == 200


def test_a_superuser_sees_every_teams_connections_read_only_with_the_token_masked(
    actors: Actors, root: User, connection: ProviderConnection
) -> None:
    client = client_for(root)

    listing = client.get("/admin/providers/providerconnection/").content.decode()
    detail = client.get(f"/admin/providers/providerconnection/{connection.pk}/change/")
    edited = client.post(
        f"/admin/providers/providerconnection/{connection.pk}/change/",
        {"team": actors.team.pk, "name": "Renamed", "kind": ConnectionKind.WORKERS_AI, "account_id": "a1"},
    )

    assert "Ours" in listing and "••••mnop" in listing and TOKEN not in listing
    assert detail.status_code == 200
    assert TOKEN not in detail.content.decode() and connection.token_ciphertext not in detail.content.decode()
    assert 'name="name"' not in detail.content.decode()  # a view-only page: no form field
    assert edited.status_code == 403
    assert client.get("/admin/providers/providerconnection/add/").status_code == 403
    connection.refresh_from_db()
    assert connection.name == "Ours"


def test_usage_records_cannot_be_edited_or_deleted_even_by_a_superuser(actors: Actors, root: User) -> None:
    record = UsageRecord.objects.create(team=actors.team, model_id="alpha-model", status=UsageStatus.OK)
    client = client_for(root)

    edited = client.post(
        f"/admin/usage/usagerecord/{record.pk}/change/", {"model_id": "cheaper", "status": "ok"}
    )
    deleted = client.post(f"/admin/usage/usagerecord/{record.pk}/delete/", {"post": "yes"})

    assert (edited.status_code, deleted.status_code) == (403, 403)
    record.refresh_from_db()
    assert record.model_id == "alpha-model"
