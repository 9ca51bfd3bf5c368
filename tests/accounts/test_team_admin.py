"""The admin's team and usage-record pages: who may see, rename or delete what."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from playground.accounts.models import Membership, Role, Team
from playground.usage.models import UsageRecord, UsageStatus
from tests.conftest import Actors

pytestmark = pytest.mark.django_db


@pytest.fixture
def team_admin(actors: Actors) -> User:
    user = User.objects.create_user("team-admin", password="password-team-admin", is_staff=True)
    Membership.objects.create(team=actors.team, user=user, role=Role.ADMIN)
    for staff in (actors.owner, actors.outsider):
        staff.is_staff = True
        staff.save()
    return user


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def change_url(team: Team) -> str:
    return f"/admin/accounts/team/{team.pk}/change/"


def rename(user: User, team: Team, name: str) -> int:
    response = logged_in(user).post(change_url(team), {"name": name, "slug": team.slug})
    return response.status_code


def test_an_owner_renames_their_team(actors: Actors, team_admin: User) -> None:
    assert rename(actors.owner, actors.team, "Alpha Prime") == 302

    actors.team.refresh_from_db()
    assert actors.team.name == "Alpha Prime"


def test_a_team_admin_sees_the_team_read_only_and_cannot_rename_it(actors: Actors, team_admin: User) -> None:
    page = logged_in(team_admin).get(change_url(actors.team))

    assert page.status_code == 200
    assert 'name="name"' not in page.content.decode()  # a view-only page: no form field
    assert rename(team_admin, actors.team, "Hijacked") == 403
    actors.team.refresh_from_db()
    assert actors.team.name == "Alpha"


@pytest.mark.parametrize("who", ["owner", "superuser"])
def test_nobody_deletes_a_team_from_the_team_admin(actors: Actors, team_admin: User, who: str) -> None:
    user = actors.owner if who == "owner" else User.objects.create_superuser("root", password="password-root")
    client = logged_in(user)

    page = client.get(f"/admin/accounts/team/{actors.team.pk}/delete/")
    client.post(f"/admin/accounts/team/{actors.team.pk}/delete/", {"post": "yes"})
    client.post("/admin/accounts/team/", {"action": "delete_selected", "_selected_action": [actors.team.pk]})

    assert page.status_code == 403
    assert Team.objects.filter(pk=actors.team.pk).exists()


def test_the_team_list_shows_only_the_teams_one_manages(actors: Actors, team_admin: User) -> None:
    listing = logged_in(actors.outsider).get("/admin/accounts/team/").content.decode()
    elsewhere = logged_in(actors.outsider).get(change_url(actors.team))

    assert "Bravo" in listing and "Alpha" not in listing
    assert elsewhere.status_code == 302  # the admin sends a missing object back to its list


@pytest.fixture
def records(actors: Actors) -> tuple[UsageRecord, UsageRecord]:
    ours = UsageRecord.objects.create(team=actors.team, model_id="alpha-model", status=UsageStatus.OK)
    theirs = UsageRecord.objects.create(team=actors.other_team, model_id="bravo-model", status=UsageStatus.OK)
    return ours, theirs


def test_usage_records_are_listed_for_the_teams_one_manages_only(
    actors: Actors, team_admin: User, records: tuple[UsageRecord, UsageRecord]
) -> None:
    ours, theirs = records

    listing = logged_in(team_admin).get("/admin/usage/usagerecord/").content.decode()
    other = logged_in(team_admin).get(f"/admin/usage/usagerecord/{theirs.pk}/change/")
    own = logged_in(team_admin).get(f"/admin/usage/usagerecord/{ours.pk}/change/")

    assert "alpha-model" in listing and "bravo-model" not in listing
    assert other.status_code == 302
    assert own.status_code == 200


def test_usage_records_cannot_be_edited_or_deleted_in_the_admin(
    actors: Actors, team_admin: User, records: tuple[UsageRecord, UsageRecord]
) -> None:
    ours, _ = records
    client = logged_in(actors.owner)

    edited = client.post(
        f"/admin/usage/usagerecord/{ours.pk}/change/", {"model_id": "cheaper", "status": "ok"}
    )
    deleted = client.post(f"/admin/usage/usagerecord/{ours.pk}/delete/", {"post": "yes"})

    assert (edited.status_code, deleted.status_code) == (403, 403)
    ours.refresh_from_db()
    assert ours.model_id == "alpha-model"


def test_a_plain_member_sees_neither_teams_nor_usage_in_the_admin(
    actors: Actors, team_admin: User, records: tuple[UsageRecord, UsageRecord]
) -> None:
    actors.teammate.is_staff = True
    actors.teammate.save()
    client = logged_in(actors.teammate)

    assert client.get("/admin/accounts/team/").status_code == 403
    assert client.get("/admin/usage/usagerecord/").status_code == 403
