"""Invitation links: one time, before they expire, for the team that made them only."""

from __future__ import annotations

import datetime as dt
import re
from urllib.parse import quote

from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from playground.accounts.models import AuditAction, AuditEvent, Invitation, Membership, Role
from playground.teams.services.invitations import invitation_create
from tests.support.actors import Actors
from tests.support.clients import client_for

LINK = re.compile(r'value="(http://testserver/teams/join/[^"/]+/)"')


def invite(actors: Actors, role: str = Role.MEMBER, email: str = "") -> str:
    """Make an invitation as Alpha's admin; the link, as the page it redirects to shows it."""
    admin = client_for(actors.admin)
    response = admin.post(
        f"/teams/{actors.team.pk}/invitations/", {"role": role, "note": "newcomer", "email": email}
    )
    assert response.status_code == 302 and response["Location"] == f"/teams/{actors.team.pk}/members/"
    match = LINK.search(admin.get(response["Location"]).content.decode())
    assert match, "the page shows the link once"
    return match.group(1).removeprefix("http://testserver")


def test_an_invited_person_joins_once_with_the_role_of_the_invitation(actors: Actors) -> None:
    link = invite(actors, Role.VIEWER)
    newcomer = User.objects.create_user("newcomer")
    client = client_for(newcomer)

    assert client.get(link).status_code == 200
    response = client.post(link)

    assert response.status_code == 302
    assert Membership.objects.get(team=actors.team, user=newcomer).role == Role.VIEWER
    assert AuditEvent.objects.filter(
        team=actors.team, action=AuditAction.MEMBER_JOINED, actor=newcomer
    ).exists()
    assert not Invitation.objects.filter(token_hash__contains=link.split("/")[-2]).exists(), (
        "only a hash is stored"
    )


def test_a_used_link_is_refused_for_the_next_person(actors: Actors) -> None:
    link = invite(actors)
    client_for(User.objects.create_user("first")).post(link)
    second = User.objects.create_user("second")

    response = client_for(second).post(link)

    assert response.status_code == 400
    assert "already used" in response.content.decode()
    assert not Membership.objects.filter(user=second).exists()


def test_an_expired_link_is_refused(actors: Actors) -> None:
    link = invite(actors)
    Invitation.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    late = User.objects.create_user("late")

    response = client_for(late).post(link)

    assert response.status_code == 400
    assert "expired" in response.content.decode()
    assert not Membership.objects.filter(user=late).exists()


def test_a_revoked_link_is_refused(actors: Actors) -> None:
    link = invite(actors)
    invitation = Invitation.objects.get()
    client_for(actors.admin).post(f"/teams/{actors.team.pk}/invitations/{invitation.pk}/revoke/")

    response = client_for(User.objects.create_user("someone")).post(link)

    assert response.status_code == 400 and "revoked" in response.content.decode()


def test_an_invitation_joins_only_its_own_team(actors: Actors) -> None:
    """Bravo's invitation brings you into Bravo, whatever Alpha page you came from, and
    Alpha's admins can neither see nor revoke it."""
    bravo_owner = Membership.objects.get(team=actors.other_team, user=actors.outsider)
    invitation, token = invitation_create(actor=bravo_owner, role=Role.MEMBER)
    newcomer = User.objects.create_user("newcomer")

    client_for(newcomer).post(f"/teams/join/{token}/")

    assert list(Membership.objects.filter(user=newcomer).values_list("team__slug", flat=True)) == ["bravo"]
    revoke = client_for(actors.owner).post(f"/teams/{actors.team.pk}/invitations/{invitation.pk}/revoke/")
    assert revoke.status_code == 302
    invitation.refresh_from_db()
    assert invitation.revoked_at is None, "Alpha's owner cannot revoke Bravo's invitation"
    assert (
        client_for(actors.owner)
        .post(f"/teams/{actors.other_team.pk}/invitations/{invitation.pk}/revoke/")
        .status_code
        == 404
    )


def test_a_member_already_in_the_team_cannot_use_a_link_again(actors: Actors) -> None:
    link = invite(actors, Role.ADMIN)

    response = client_for(actors.viewer).post(link)

    assert response.status_code == 400
    assert actors.membership(actors.viewer).role == Role.VIEWER, (
        "an invitation is no way to raise your own role"
    )


def test_admins_cannot_invite_owners(actors: Actors) -> None:
    response = client_for(actors.admin).post(f"/teams/{actors.team.pk}/invitations/", {"role": Role.OWNER})
    assert response.status_code == 400
    assert not Invitation.objects.exists()


def test_a_made_up_token_is_refused(actors: Actors) -> None:
    response = client_for(actors.outsider).get("/teams/join/not-a-real-token/")
    assert response.status_code == 400 and "not valid" in response.content.decode()


# --- creating a link: post, redirect, get (a reload makes no second invitation) -------------------


def test_creating_an_invitation_redirects_and_the_page_shows_the_link_once_with_a_copy_button(
    actors: Actors,
) -> None:
    admin = client_for(actors.admin)

    response = admin.post(f"/teams/{actors.team.pk}/invitations/", {"role": Role.MEMBER}, follow=True)

    assert response.redirect_chain == [(f"/teams/{actors.team.pk}/members/", 302)]
    page = response.content.decode()
    assert LINK.search(page)
    assert 'data-copy="invitation-link"' in page and "js/copy.js" in page
    reloaded = admin.get(f"/teams/{actors.team.pk}/members/").content.decode()
    assert not LINK.search(reloaded), "shown once: a reload shows no link"
    assert Invitation.objects.count() == 1, "the reload made no second invitation"


def test_the_link_is_shown_on_its_own_teams_page_only(actors: Actors) -> None:
    Membership.objects.create(team=actors.other_team, user=actors.admin, role=Role.ADMIN)
    admin = client_for(actors.admin)
    admin.post(f"/teams/{actors.team.pk}/invitations/", {"role": Role.MEMBER})

    assert not LINK.search(admin.get(f"/teams/{actors.other_team.pk}/members/").content.decode())
    assert LINK.search(admin.get(f"/teams/{actors.team.pk}/members/").content.decode())


def test_a_malformed_email_keeps_the_form_and_makes_no_invitation(actors: Actors) -> None:
    response = client_for(actors.admin).post(
        f"/teams/{actors.team.pk}/invitations/", {"role": Role.MEMBER, "email": "not-an-address"}
    )

    assert response.status_code == 400
    assert "Enter a valid email address." in response.content.decode()
    assert not Invitation.objects.exists()


# --- a visitor without an account ------------------------------------------------------------------


def test_a_visitor_sees_the_team_who_invites_them_and_a_sign_up_form_with_the_email_filled_in(
    actors: Actors,
) -> None:
    link = invite(actors, Role.VIEWER, email="new.person@example.com")

    response = Client().get(link)

    assert response.status_code == 200
    page = response.content.decode()
    assert "Join Alpha" in page
    assert "<strong>admin</strong> invited you" in page and "Viewer" in page
    assert 'value="new.person@example.com"' in page
    assert f'action="{link}signup/"' in page
    assert f"/login/?next={quote(link, safe='')}" in page, "a way to log in instead"
    assert "at least 8 characters" in page.lower(), "the password rules come from the validators"


def test_a_visitor_signs_up_from_the_link_and_joins_with_the_invited_role(actors: Actors) -> None:
    link = invite(actors, Role.VIEWER, email="new.person@example.com")
    visitor = Client()

    response = visitor.post(
        link + "signup/",
        {
            "username": "newperson",
            "email": "new.person@example.com",
            "password1": "a long passphrase 42",
            "password2": "a long passphrase 42",
        },
    )

    assert response.status_code == 302 and response["Location"] == f"/teams/{actors.team.pk}/members/"
    user = User.objects.get(username="newperson")
    assert user.email == "new.person@example.com" and user.check_password("a long passphrase 42")
    assert actors.membership(user).role == Role.VIEWER
    page = visitor.get(response["Location"]).content.decode()
    assert "Welcome to Alpha." in page, "signed in and on the team's page"
    event = AuditEvent.objects.get(action=AuditAction.MEMBER_JOINED)
    assert (event.actor, event.target, event.detail) == (
        user,
        "newperson",
        {"role": Role.VIEWER, "invited_by": "admin", "account": "new"},
    )
    assert Invitation.objects.get().accepted_by == user


def test_sign_up_applies_the_password_validators_and_creates_nothing_until_they_pass(actors: Actors) -> None:
    link = invite(actors)
    form = {
        "username": "newperson",
        "email": "n@example.com",
        "password1": "password",
        "password2": "password",
    }

    response = Client().post(link + "signup/", form)

    assert response.status_code == 400
    page = response.content.decode()
    assert "This password is too common." in page
    assert 'value="newperson"' in page, "what was typed is kept"
    assert not User.objects.filter(username="newperson").exists()
    assert Invitation.objects.get().accepted_at is None, "the link still works"


def test_sign_up_refuses_a_username_that_is_taken_in_any_case(actors: Actors) -> None:
    link = invite(actors)
    form = {"username": "TEAMMATE", "email": "m@example.com", "password1": "a long passphrase 42"}

    response = Client().post(link + "signup/", {**form, "password2": form["password1"]})

    assert response.status_code == 400
    assert "A user with that username already exists." in response.content.decode()
    assert User.objects.filter(username__iexact="teammate").count() == 1


def test_sign_up_with_a_used_link_says_so_and_creates_no_account(actors: Actors) -> None:
    link = invite(actors)
    client_for(User.objects.create_user("first")).post(link)
    form = {"username": "second", "email": "s@example.com", "password1": "a long passphrase 42"}

    response = Client().post(link + "signup/", {**form, "password2": form["password1"]})

    assert response.status_code == 400
    assert "already used" in response.content.decode()
    assert not User.objects.filter(username="second").exists()


def test_a_visitor_opening_an_expired_link_gets_a_page_that_says_so_and_what_to_do(actors: Actors) -> None:
    link = invite(actors)
    Invitation.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))

    response = Client().get(link)

    assert response.status_code == 400
    page = response.content.decode()
    assert "This invitation link cannot be used" in page and "expired" in page
    assert "Create account" not in page
    assert 'href="/login/"' in page, "a way on"


def test_a_visitor_who_presses_join_is_sent_to_log_in_first(actors: Actors) -> None:
    link = invite(actors)

    response = Client().post(link)

    assert response.status_code == 302 and response["Location"] == f"/login/?next={quote(link, safe='/')}"
    assert Invitation.objects.get().accepted_at is None


# --- someone with an account logs in from the link -----------------------------------------------


def test_the_login_page_says_which_teams_invitation_it_accepts(actors: Actors) -> None:
    link = invite(actors)
    User.objects.create_user("existing", password="password-existing")
    client = Client()

    page = client.get(f"/login/?next={quote(link)}").content.decode()
    assert "invitation to join <strong>Alpha</strong> as member" in page
    response = client.post("/login/", {"username": "existing", "password": "password-existing", "next": link})
    assert response.status_code == 302 and response["Location"] == link
    assert client.post(link).status_code == 302

    assert actors.membership(User.objects.get(username="existing")).role == Role.MEMBER
    event = AuditEvent.objects.get(action=AuditAction.MEMBER_JOINED)
    assert event.detail["account"] == "existing"


def test_the_login_page_says_nothing_of_a_link_that_cannot_be_used(actors: Actors) -> None:
    link = invite(actors)
    Invitation.objects.update(revoked_at=timezone.now())

    page = Client().get(f"/login/?next={quote(link)}").content.decode()

    assert "invitation" not in page.lower()


# --- the login limits cover the sign-up form ----------------------------------------------------------


def sign_up(link: str, username: str, *, address: str = "198.51.100.7") -> int:
    form = {"username": username, "email": "x@example.com", "password1": "a long passphrase 42"}
    return (
        Client(REMOTE_ADDR=address)
        .post(link + "signup/", {**form, "password2": form["password1"]})
        .status_code
    )


def test_sign_ups_with_links_that_are_not_valid_count_as_failed_logins(actors: Actors) -> None:
    statuses = [sign_up(f"/teams/join/guess-{number}/", f"guess-{number}") for number in range(10)]

    assert statuses == [400] * 9 + [429]
    assert sign_up(invite(actors), "newperson") == 429, "the address is locked out of sign-ups"
    login = Client(REMOTE_ADDR="198.51.100.7").post(
        "/login/", {"username": "owner", "password": "password-owner"}
    )
    assert login.status_code == 429, "and of logins"
    assert not User.objects.filter(username="newperson").exists()


def test_an_address_locked_out_of_logins_cannot_sign_up_either(actors: Actors) -> None:
    link = invite(actors)
    for _ in range(10):
        Client(REMOTE_ADDR="198.51.100.7").post("/login/", {"username": "owner", "password": "wrong"})

    assert sign_up(link, "newperson") == 429
    assert sign_up(link, "newperson", address="203.0.113.99") == 302, "elsewhere it works"
