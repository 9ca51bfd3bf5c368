from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from playground.accounts.models import Membership, Role
from playground.providers.models import ConnectionKind, ProviderConnection

pytestmark = pytest.mark.django_db


def run_demo_setup() -> str:
    out = StringIO()
    call_command("demo_setup", stdout=out)
    return out.getvalue()


def test_it_creates_the_demo_owner_with_an_engine_connection_and_prints_the_login_once(
    monkeypatch: Any,
) -> None:
    monkeypatch.setenv("PLAYGROUND_DEMO_PASSWORD", "correct-horse-battery")

    first = run_demo_setup()
    second = run_demo_setup()

    assert "demo" in first and "correct-horse-battery" in first
    assert "correct-horse-battery" not in second
    user = User.objects.get(username="demo")
    assert user.check_password("correct-horse-battery")
    membership = Membership.objects.get(user=user)
    assert membership.role == Role.OWNER
    engine = ProviderConnection.objects.get(team=membership.team)
    assert engine.kind == ConnectionKind.ENGINE and engine.is_default


def test_it_generates_a_password_when_none_is_given(monkeypatch: Any) -> None:
    monkeypatch.delenv("PLAYGROUND_DEMO_PASSWORD", raising=False)

    output = run_demo_setup()

    password = output.strip().rsplit(" / ", 1)[1]
    assert len(password) >= 12
    assert User.objects.get(username="demo").check_password(password)


def test_the_printed_login_reaches_the_team_pages_and_not_the_admin(monkeypatch: Any) -> None:
    monkeypatch.setenv("PLAYGROUND_DEMO_PASSWORD", "correct-horse-battery")
    output = run_demo_setup()
    client = Client()

    signed_in = client.post("/login/", {"username": "demo", "password": "correct-horse-battery"})

    assert signed_in.status_code == 302
    team = Membership.objects.get(user__username="demo").team

    assert "/teams/" in output
    assert client.get(f"/teams/{team.pk}/members/").status_code == 200
    assert client.get(f"/teams/{team.pk}/connections/").status_code == 200
    assert client.get("/admin/").status_code == 302  # the admin is for superusers only
