"""Invitation links: one time, before they expire, for the team that made them only."""

from __future__ import annotations

import datetime as dt
import re

from django.contrib.auth.models import User
from django.utils import timezone

from playground.accounts.models import AuditAction, AuditEvent, Invitation, Membership, Role
from playground.teams.services import invitation_create
from tests.teams.conftest import Crew, signed_in


def invite(crew: Crew, role: str = Role.MEMBER) -> str:
    response = signed_in(crew.admin).post(
        f"/teams/{crew.team.pk}/invitations/", {"role": role, "note": "newcomer"}
    )
    assert response.status_code == 200
    match = re.search(r'value="(http://testserver/teams/join/[^"/]+/)"', response.content.decode())
    assert match, "the page shows the link once"
    return match.group(1).removeprefix("http://testserver")


def test_an_invited_person_joins_once_with_the_role_of_the_invitation(crew: Crew) -> None:
    link = invite(crew, Role.VIEWER)
    newcomer = User.objects.create_user("newcomer")
    client = signed_in(newcomer)

    assert client.get(link).status_code == 200
    response = client.post(link)

    assert response.status_code == 302
    assert Membership.objects.get(team=crew.team, user=newcomer).role == Role.VIEWER
    assert AuditEvent.objects.filter(
        team=crew.team, action=AuditAction.MEMBER_JOINED, actor=newcomer
    ).exists()
    assert not Invitation.objects.filter(token_hash__contains=link.split("/")[-2]).exists(), (
        "only a hash is stored"
    )


def test_a_used_link_is_refused_for_the_next_person(crew: Crew) -> None:
    link = invite(crew)
    signed_in(User.objects.create_user("first")).post(link)
    second = User.objects.create_user("second")

    response = signed_in(second).post(link)

    assert response.status_code == 400
    assert "already used" in response.content.decode()
    assert not Membership.objects.filter(user=second).exists()


def test_an_expired_link_is_refused(crew: Crew) -> None:
    link = invite(crew)
    Invitation.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    late = User.objects.create_user("late")

    response = signed_in(late).post(link)

    assert response.status_code == 400
    assert "expired" in response.content.decode()
    assert not Membership.objects.filter(user=late).exists()


def test_a_revoked_link_is_refused(crew: Crew) -> None:
    link = invite(crew)
    invitation = Invitation.objects.get()
    signed_in(crew.admin).post(f"/teams/{crew.team.pk}/invitations/{invitation.pk}/revoke/")

    response = signed_in(User.objects.create_user("someone")).post(link)

    assert response.status_code == 400 and "revoked" in response.content.decode()


def test_an_invitation_joins_only_its_own_team(crew: Crew) -> None:
    """Bravo's invitation brings you into Bravo, whatever Alpha page you came from, and
    Alpha's admins can neither see nor revoke it."""
    bravo_owner = Membership.objects.get(team=crew.other_team, user=crew.outsider)
    invitation, token = invitation_create(actor=bravo_owner, role=Role.MEMBER)
    newcomer = User.objects.create_user("newcomer")

    signed_in(newcomer).post(f"/teams/join/{token}/")

    assert list(Membership.objects.filter(user=newcomer).values_list("team__slug", flat=True)) == ["bravo"]
    revoke = signed_in(crew.owner).post(f"/teams/{crew.team.pk}/invitations/{invitation.pk}/revoke/")
    assert revoke.status_code == 302
    invitation.refresh_from_db()
    assert invitation.revoked_at is None, "Alpha's owner cannot revoke Bravo's invitation"
    assert (
        signed_in(crew.owner)
        .post(f"/teams/{crew.other_team.pk}/invitations/{invitation.pk}/revoke/")
        .status_code
        == 404
    )


def test_a_member_already_in_the_team_cannot_use_a_link_again(crew: Crew) -> None:
    link = invite(crew, Role.ADMIN)

    response = signed_in(crew.viewer).post(link)

    assert response.status_code == 400
    assert crew.membership(crew.viewer).role == Role.VIEWER, "an invitation is no way to raise your own role"


def test_admins_cannot_invite_owners(crew: Crew) -> None:
    response = signed_in(crew.admin).post(f"/teams/{crew.team.pk}/invitations/", {"role": Role.OWNER})
    assert response.status_code == 400
    assert not Invitation.objects.exists()


def test_a_made_up_token_is_refused(crew: Crew) -> None:
    response = signed_in(crew.outsider).get("/teams/join/not-a-real-token/")
    assert response.status_code == 400 and "not valid" in response.content.decode()
