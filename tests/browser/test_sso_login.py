"""Single sign-on in Chromium against the real OpenID provider on loopback (tests/support/oidc.py):
the login page offers "Sign in with Acme ID" beside the password form, at a laptop's and a phone's
width, and the first sign-in creates the user in the team the provider's claim names, signed in.
Screenshots: test-artifacts/sso-*.png (and /tmp/shots_oidc/ when that folder exists)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from playwright.sync_api import expect

from playground.accounts.models import AuditAction, AuditEvent, Membership, Role, Team
from tests.support.browser import Console, LiveApp, browser_page
from tests.support.oidc import oidc_provider, sso_configure

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path("/tmp/shots_oidc")


def test_the_first_sso_login_creates_the_user_in_the_mapped_team_and_lands_signed_in(
    live_app: LiveApp, settings: LazySettings, chromium_path: str, artifacts: Path
) -> None:
    team = Team.objects.create(name="Research", slug="research")
    shots = [artifacts] + ([SHOTS] if SHOTS.is_dir() else [])
    console = Console()
    with oidc_provider(f"{live_app.url}/sso/callback/", team="research:member") as provider:
        sso_configure(settings, provider.issuer)
        with browser_page(chromium_path, console=console) as page:
            page.goto(live_app.url + "/sso/callback/?code=x&state=forged")  # a state it never started
            expect(page.get_by_role("heading", name="Sign-in with Acme ID refused")).to_be_visible()
            for folder in shots:
                page.screenshot(path=folder / "sso-refused-1280.png")
            for width, height in [(390, 844), (1280, 800)]:
                page.set_viewport_size({"width": width, "height": height})
                page.goto(live_app.url + "/login/")
                button = page.get_by_role("link", name="Sign in with Acme ID")
                expect(button).to_be_visible()
                expect(page.get_by_label("Password")).to_be_visible()
                assert page.evaluate("document.documentElement.scrollWidth") <= width
                for folder in shots:
                    page.screenshot(path=folder / f"sso-login-{width}.png", full_page=True)
            button.click()
            expect(page).to_have_url(live_app.url + "/chat/")
            expect(page.get_by_text("ada", exact=True).first).to_be_visible()
            for folder in shots:
                page.screenshot(path=folder / "sso-signed-in-1280.png")
    assert [problem for problem in console.problems if "400" not in problem] == []  # the refusal's status
    user = User.objects.get(email="ada@example.test")
    assert Membership.objects.get(user=user).role == Role.MEMBER
    assert Membership.objects.get(user=user).team == team
    assert AuditEvent.objects.filter(team=team, action=AuditAction.MEMBER_JOINED, actor=user).exists()
