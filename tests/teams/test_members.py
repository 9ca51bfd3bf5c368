"""Role changes: admins never touch owners, the last owner stays, ownership moves whole."""

from __future__ import annotations

from playground.accounts.models import AuditAction, AuditEvent, Membership, Role
from tests.support.actors import Actors
from tests.support.clients import client_for


def test_an_admin_changes_a_members_role_and_the_audit_log_says_who_and_when(actors: Actors) -> None:
    target = actors.membership(actors.teammate)

    client_for(actors.admin).post(f"/teams/{actors.team.pk}/members/{target.pk}/role/", {"role": Role.VIEWER})

    assert actors.membership(actors.teammate).role == Role.VIEWER
    event = AuditEvent.objects.get(action=AuditAction.ROLE_CHANGED)
    assert (event.actor, event.target, event.detail) == (
        actors.admin,
        "teammate",
        {"previous": "member", "role": "viewer"},
    )
    page = client_for(actors.owner).get(f"/teams/{actors.team.pk}/audit/").content.decode()
    assert "Changed a role" in page and "admin" in page


def test_an_admin_can_neither_demote_nor_remove_an_owner_nor_make_one(actors: Actors) -> None:
    owner = actors.membership(actors.owner)
    admin = client_for(actors.admin)

    admin.post(f"/teams/{actors.team.pk}/members/{owner.pk}/role/", {"role": Role.MEMBER})
    admin.post(f"/teams/{actors.team.pk}/members/{owner.pk}/remove/")
    admin.post(
        f"/teams/{actors.team.pk}/members/{actors.membership(actors.teammate).pk}/role/", {"role": Role.OWNER}
    )

    assert actors.membership(actors.owner).role == Role.OWNER
    assert actors.membership(actors.teammate).role == Role.MEMBER
    assert not AuditEvent.objects.exists()


def test_the_last_owner_cannot_be_demoted_removed_or_leave(actors: Actors) -> None:
    owner = actors.membership(actors.owner)
    client = client_for(actors.owner)

    response = client.post(
        f"/teams/{actors.team.pk}/members/{owner.pk}/role/", {"role": Role.ADMIN}, follow=True
    )
    assert "A team needs an owner" in response.content.decode()
    client.post(f"/teams/{actors.team.pk}/leave/")

    assert actors.membership(actors.owner).role == Role.OWNER


def test_an_owner_may_leave_once_another_owner_exists(actors: Actors) -> None:
    client_for(actors.owner).post(
        f"/teams/{actors.team.pk}/members/{actors.membership(actors.admin).pk}/role/", {"role": "owner"}
    )

    client_for(actors.owner).post(f"/teams/{actors.team.pk}/leave/")

    assert not Membership.objects.filter(team=actors.team, user=actors.owner).exists()


def test_transferring_ownership_makes_the_old_owner_an_admin(actors: Actors) -> None:
    client_for(actors.owner).post(
        f"/teams/{actors.team.pk}/members/{actors.membership(actors.teammate).pk}/make-owner/"
    )

    assert actors.membership(actors.teammate).role == Role.OWNER
    assert actors.membership(actors.owner).role == Role.ADMIN
    assert AuditEvent.objects.filter(action=AuditAction.OWNERSHIP_TRANSFERRED, target="teammate").exists()


def test_a_member_of_another_team_is_not_found(actors: Actors) -> None:
    bravo = Membership.objects.get(team=actors.other_team, user=actors.outsider)

    response = client_for(actors.owner).post(f"/teams/{actors.team.pk}/members/{bravo.pk}/remove/")

    assert response.status_code == 302
    assert Membership.objects.filter(pk=bravo.pk).exists()
