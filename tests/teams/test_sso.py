"""Single sign-on against a real OpenID provider on loopback (the certified `oidc-provider`,
tests/support/oidc.py): users matched or created by verified e-mail, the team claim, passwords
off, and every fault refused with a page that says why."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin

import httpx
import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from django.test import Client

from playground.accounts.models import AuditAction, AuditEvent, Membership, Role, Team
from playground.teams.services.sso import sso_claim_entries
from tests.support.oidc import CLIENT_SECRET, oidc_provider, sso_configure

if TYPE_CHECKING:
    from tests.support.clients import TestResponse

pytestmark = pytest.mark.django_db

CALLBACK = "http://testserver/sso/callback/"


def provider_round_trip(client: Client, then: str = "/chat/") -> str:
    """Start at /sso/login/ and let the provider answer (it signs the configured account in at
    once); the app's callback URL it sends the browser back to."""
    start = client.get(f"/sso/login/?next={then}")
    assert start.status_code == 302, start.content
    location = start["Location"]
    with httpx.Client(timeout=10) as browser:
        while not location.startswith(CALLBACK):
            answer = browser.get(location)
            assert answer.is_redirect, answer.text
            location = urljoin(location, answer.headers["location"])
    return location.removeprefix("http://testserver")


def sign_in(client: Client, then: str = "/chat/") -> TestResponse:
    return client.get(provider_round_trip(client, then))


def refused(response: TestResponse, status: int, text: str) -> None:
    page = response.content.decode()
    assert response.status_code == status, page
    assert "Sign-in with Acme ID refused" in page
    assert text in page
    assert "_auth_user_id" not in response.wsgi_request.session


def test_the_first_sign_in_creates_the_user_in_the_mapped_team_and_the_next_finds_them(
    settings: LazySettings,
) -> None:
    team = Team.objects.create(name="Research", slug="research")
    with oidc_provider(CALLBACK, team=["research:admin", "nowhere:member"]) as provider:
        sso_configure(settings, provider.issuer)
        first = sign_in(Client())
        again = sign_in(Client())

    assert first.status_code == 302 and first["Location"] == "/chat/"
    assert again.status_code == 302
    user = User.objects.get(email="ada@example.test")
    assert (user.username, user.first_name, user.has_usable_password()) == ("ada", "Ada", False)
    assert User.objects.count() == 1
    membership = Membership.objects.get(user=user)
    assert (membership.team, membership.role) == (team, Role.ADMIN)
    joined = AuditEvent.objects.get(team=team, action=AuditAction.MEMBER_JOINED)
    assert (joined.actor, joined.detail) == (user, {"role": "admin", "via": "single sign-on"})


def test_an_existing_account_is_matched_by_e_mail_and_its_password_turned_off(settings: LazySettings) -> None:
    ada = User.objects.create_user("ada.lovelace", email="Ada@Example.test", password="a-long-password-1")
    with oidc_provider(CALLBACK) as provider:
        sso_configure(settings, provider.issuer, OIDC_DISABLE_PASSWORDS=True)
        client = Client()
        assert sign_in(client).status_code == 302
        assert client.get("/chat/").context["user"] == ada

        refused_form = Client().post("/login/", {"username": "ada.lovelace", "password": "a-long-password-1"})
    ada.refresh_from_db()
    assert not ada.has_usable_password()
    assert refused_form.status_code == 200
    assert "This account signs in with Acme ID" in refused_form.content.decode()
    assert "_auth_user_id" not in refused_form.wsgi_request.session


def test_the_login_page_offers_the_provider_only_when_configured(settings: LazySettings) -> None:
    assert "Sign in with" not in Client().get("/login/").content.decode()
    assert Client().get("/sso/login/").status_code == 404
    assert Client().get("/sso/callback/?code=x&state=y").status_code == 404

    sso_configure(settings, "http://127.0.0.1:9")
    page = Client().get("/login/?next=/usage/").content.decode()
    assert 'href="/sso/login/?next=/usage/">Sign in with Acme ID</a>' in page
    assert 'name="password"' in page  # the password form stays beside it


def test_an_unverified_e_mail_is_refused(settings: LazySettings) -> None:
    with oidc_provider(CALLBACK, verified=False, team="research:owner") as provider:
        sso_configure(settings, provider.issuer)
        response = sign_in(Client())
    refused(response, 403, "has not verified your e-mail address")
    assert not User.objects.exists()


@pytest.mark.parametrize(
    ("fault", "text"),
    [
        ({"audience": "another-app"}, "issued for another application"),
        ({"expired": True}, "had expired"),
    ],
)
def test_an_id_token_for_another_audience_or_expired_is_refused(
    settings: LazySettings, fault: dict[str, object], text: str
) -> None:
    with oidc_provider(CALLBACK, **fault) as provider:  # type: ignore[arg-type]
        sso_configure(settings, provider.issuer)
        response = sign_in(Client())
    refused(response, 403, text)
    assert not User.objects.exists()


def test_a_replayed_or_forged_state_is_refused(settings: LazySettings) -> None:
    with oidc_provider(CALLBACK) as provider:
        sso_configure(settings, provider.issuer)
        client = Client()
        callback = provider_round_trip(client)
        assert client.get(callback).status_code == 302
        refused(Client().get(callback), 400, "not one this browser started")  # another browser
        client.logout()
        refused(client.get(callback), 400, "not one this browser started")

        stranger = Client()
        provider_round_trip(stranger)
        refused(stranger.get("/sso/callback/?code=abc&state=forged"), 400, "not one this browser started")


def test_a_provider_that_is_down_is_refused_and_the_secret_never_logged(
    settings: LazySettings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    sso_configure(settings, f"http://127.0.0.1:{port}")
    refused(Client().get("/sso/login/"), 502, "did not answer")

    with oidc_provider(CALLBACK) as provider:
        sso_configure(settings, provider.issuer)
        client = Client()
        callback = provider_round_trip(client)
    refused(client.get(callback), 502, "did not answer")  # the provider stopped before the code was redeemed
    assert CLIENT_SECRET not in caplog.text


def test_the_team_claim_reads_one_entry_or_a_list() -> None:
    assert sso_claim_entries("research:Admin") == [("research", "admin")]
    assert sso_claim_entries(["a", " b : viewer ", "", 7]) == [("a", "member"), ("b", "viewer")]
    assert sso_claim_entries(None) == []


def test_the_environment_turns_it_on_with_the_secret_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "oidc_secret"
    secret.write_text("from-a-file\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OIDC_", "DATABASE_URL", "REDIS_URL"))}
    env |= {
        "DJANGO_SETTINGS_MODULE": "playground.settings",
        "PLAYGROUND_DATA_DIR": str(tmp_path),
        "OIDC_ISSUER": "https://id.example.test/realms/acme/",
        "OIDC_CLIENT_ID": "playground",
        "OIDC_CLIENT_SECRET_FILE": str(secret),
        "OIDC_PROVIDER_NAME": "Acme ID",
        "OIDC_TEAM_CLAIM": "groups",
        "OIDC_DISABLE_PASSWORDS": "1",
    }
    probe = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "from playground.teams.sso.discovery import sso_enabled; "
        "print(json.dumps([sso_enabled(), s.OIDC_ISSUER, s.OIDC_RP_CLIENT_SECRET, s.OIDC_TEAM_CLAIM, "
        "s.OIDC_DISABLE_PASSWORDS, s.OIDC_RP_SCOPES]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == [
        True,
        "https://id.example.test/realms/acme",
        "from-a-file",
        "groups",
        True,
        "openid email profile",
    ]
