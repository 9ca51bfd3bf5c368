"""`manage.py gateway_key_create`: a key for automation, the key alone on the last line."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from playground.accounts.models import AuditAction, AuditEvent, Team
from playground.gateway.admission import api_key_authenticate
from playground.providers.models import ProviderConnection
from playground.usage.models import ApiKey
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("gateway_key_create", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_prints_a_key_that_authenticates_alone_on_the_last_line(
    actors: Actors, workers_connection: ProviderConnection, openai_connection: ProviderConnection
) -> None:
    out, err = run("--team", "Alpha", "--name", "ci")  # by name; the default connection

    last = out.rstrip("\n").splitlines()[-1]
    key = api_key_authenticate(last)
    assert last.startswith("pgk_") and last.strip() == last
    assert (key.name, key.connection, key.created_by) == ("ci", workers_connection, None)
    assert "shown this once" in err and last not in err
    event = AuditEvent.objects.get()
    assert (event.action, event.actor_name, event.target) == (
        AuditAction.API_KEY_CREATED,
        "manage.py",
        f"ci ({key.prefix}…)",
    )

    out, _err = run("--team", str(actors.team.pk), "--name", "nightly", "--connection", "Gateway")  # by id
    assert api_key_authenticate(out.splitlines()[-1]).connection == openai_connection


def test_a_team_with_one_connection_needs_no_default(
    actors: Actors, openai_connection: ProviderConnection
) -> None:
    out, _err = run("--team", "Alpha", "--name", "ci")

    assert api_key_authenticate(out.splitlines()[-1]).connection == openai_connection


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--team", "Nowhere", "--name", "ci"], "No team has the id or name 'Nowhere'."),
        (["--team", "Alpha", "--name", "ci", "--connection", "Nope"], "Alpha has no connection named 'Nope'"),
        (["--team", "Alpha", "--name", "taken"], "already has a key with that name"),
        (["--team", "Twin", "--name", "ci"], "2 teams are named 'Twin'"),
    ],
)
def test_it_says_what_is_wrong_and_creates_nothing(
    actors: Actors, workers_connection: ProviderConnection, args: list[str], message: str
) -> None:
    run("--team", "Alpha", "--name", "taken")
    Team.objects.create(name="Twin", slug="twin-1")
    Team.objects.create(name="Twin", slug="twin-2")

    with pytest.raises(CommandError, match=message):
        run(*args)
    assert ApiKey.objects.count() == 1


def test_several_connections_and_no_default_need_a_choice(
    actors: Actors, workers_connection: ProviderConnection, openai_connection: ProviderConnection
) -> None:
    ProviderConnection.objects.update(is_default=False)

    with pytest.raises(CommandError, match="2 connections and none is the default: pass --connection"):
        run("--team", "Alpha", "--name", "ci")
    with pytest.raises(CommandError, match="Bravo has no connection: add one"):
        run("--team", "Bravo", "--name", "ci")
    assert not ApiKey.objects.exists()


def test_policy_makes_a_key_that_follows_the_teams_routing_policy(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    out, err = run("--team", "Alpha", "--name", "routed", "--policy")

    key = api_key_authenticate(out.splitlines()[-1])
    assert key.follows_policy and key.connection == workers_connection
    assert "following the team routing policy" in err
    assert AuditEvent.objects.get().detail["follows_routing_policy"] is True
    out, _err = run("--team", "Alpha", "--name", "plain")
    assert not api_key_authenticate(out.splitlines()[-1]).follows_policy
