"""Role changes: admins never touch owners, the last owner stays, ownership moves whole."""

from __future__ import annotations

from playground.accounts.models import AuditAction, AuditEvent, Membership, Role
from tests.teams.conftest import Crew, signed_in


def role_of(crew: Crew, user: object) -> str:
    return Membership.objects.get(team=crew.team, user=user).role


def test_an_admin_changes_a_members_role_and_the_audit_log_says_who_and_when(crew: Crew) -> None:
    target = crew.membership(crew.member)

    signed_in(crew.admin).post(f"/teams/{crew.team.pk}/members/{target.pk}/role/", {"role": Role.VIEWER})

    assert role_of(crew, crew.member) == Role.VIEWER
    event = AuditEvent.objects.get(action=AuditAction.ROLE_CHANGED)
    assert (event.actor, event.target, event.detail) == (
        crew.admin,
        "member",
        {"previous": "member", "role": "viewer"},
    )
    page = signed_in(crew.owner).get(f"/teams/{crew.team.pk}/audit/").content.decode()
    assert "Changed a role" in page and "admin" in page


def test_an_admin_can_neither_demote_nor_remove_an_owner_nor_make_one(crew: Crew) -> None:
    owner = crew.membership(crew.owner)
    admin = signed_in(crew.admin)

    admin.post(f"/teams/{crew.team.pk}/members/{owner.pk}/role/", {"role": Role.MEMBER})
    admin.post(f"/teams/{crew.team.pk}/members/{owner.pk}/remove/")
    admin.post(f"/teams/{crew.team.pk}/members/{crew.membership(crew.member).pk}/role/", {"role": Role.OWNER})

    assert role_of(crew, crew.owner) == Role.OWNER
    assert role_of(crew, crew.member) == Role.MEMBER
    assert not AuditEvent.objects.exists()


def test_the_last_owner_cannot_be_demoted_removed_or_leave(crew: Crew) -> None:
    owner = crew.membership(crew.owner)
    client = signed_in(crew.owner)

    response = client.post(
        f"/teams/{crew.team.pk}/members/{owner.pk}/role/", {"role": Role.ADMIN}, follow=True
    )
    assert "A team needs an owner" in response.content.decode()
    client.post(f"/teams/{crew.team.pk}/leave/")

    assert role_of(crew, crew.owner) == Role.OWNER


def test_an_owner_may_leave_once_another_owner_exists(crew: Crew) -> None:
    signed_in(crew.owner).post(
        f"/teams/{crew.team.pk}/members/{crew.membership(crew.admin).pk}/role/", {"role": "owner"}
    )

    signed_in(crew.owner).post(f"/teams/{crew.team.pk}/leave/")

    assert not Membership.objects.filter(team=crew.team, user=crew.owner).exists()


def test_transferring_ownership_makes_the_old_owner_an_admin(crew: Crew) -> None:
    signed_in(crew.owner).post(f"/teams/{crew.team.pk}/members/{crew.membership(crew.member).pk}/make-owner/")

    assert role_of(crew, crew.member) == Role.OWNER
    assert role_of(crew, crew.owner) == Role.ADMIN
    assert AuditEvent.objects.filter(action=AuditAction.OWNERSHIP_TRANSFERRED, target="member").exists()


def test_a_member_of_another_team_is_not_found(crew: Crew) -> None:
    bravo = Membership.objects.get(team=crew.other_team, user=crew.outsider)

    response = signed_in(crew.owner).post(f"/teams/{crew.team.pk}/members/{bravo.pk}/remove/")

    assert response.status_code == 302
    assert Membership.objects.filter(pk=bravo.pk).exists()
