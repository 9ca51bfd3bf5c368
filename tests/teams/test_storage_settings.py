"""Storage modes set where people set them: the team's Data page, `manage.py team_settings`, a key's
form and `manage.py gateway_key_create --store`."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from playground.accounts.models import AuditAction, AuditEvent, StoreMode, Team
from playground.providers.models import ProviderConnection
from playground.usage.api_keys import api_key_issue
from playground.usage.models import TEAM_STORE_MODE, ApiKey
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db


CHECKED = 'value="{}" id="id_store_mode_{}" required checked'


def data_url(actors: Actors) -> str:
    return f"/teams/{actors.team.pk}/data/"


def test_an_owner_sets_the_teams_mode_on_the_data_page_and_it_is_audited(actors: Actors) -> None:
    owner = client_for(actors.owner)
    assert CHECKED.format("full", 0) in owner.get(data_url(actors)).content.decode()

    response = owner.post(data_url(actors), {"store_mode": "redacted"})

    assert response.status_code == 302
    assert Team.objects.get(pk=actors.team.pk).store_mode == StoreMode.REDACTED
    event = AuditEvent.objects.get(action=AuditAction.STORE_MODE_CHANGED)
    assert (event.actor, event.detail) == (actors.owner, {"previous": "full", "store_mode": "redacted"})
    page = owner.get(data_url(actors)).content.decode()
    assert "now keep: redacted" in page and CHECKED.format("redacted", 1) in page


def test_admins_and_members_read_the_mode_outsiders_see_no_page_and_a_bad_mode_is_refused(
    actors: Actors,
) -> None:
    admin_page = client_for(actors.admin).get(data_url(actors)).content.decode()

    assert "owners change this" in admin_page and "Full: the text as sent" in admin_page
    assert client_for(actors.admin).post(data_url(actors), {"store_mode": "metadata"}).status_code == 403
    assert client_for(actors.teammate).get(data_url(actors)).status_code == 200
    assert client_for(actors.outsider).get(data_url(actors)).status_code == 404
    refused = client_for(actors.owner).post(data_url(actors), {"store_mode": "everything"})
    assert refused.status_code == 400 and "Select a valid choice" in refused.content.decode()
    assert Team.objects.get(pk=actors.team.pk).store_mode == StoreMode.FULL


def test_the_page_lists_each_keys_mode(actors: Actors, workers_connection: ProviderConnection) -> None:
    for name, mode in (("own", StoreMode.METADATA), ("follows", TEAM_STORE_MODE)):
        api_key_issue(
            team_id=actors.team.pk,
            name=name,
            connection_id=workers_connection.pk,
            created_by_id=None,
            store_mode=mode,
        )

    page = client_for(actors.teammate).get(data_url(actors)).content.decode()

    assert "Metadata only: no prompt or answer text" in page
    assert "the team's: full: the text as sent" in page


def test_team_settings_prints_and_sets_the_mode(actors: Actors) -> None:
    out = StringIO()
    call_command("team_settings", "--team", "Alpha", stdout=out)
    call_command("team_settings", "--team", str(actors.team.pk), "--store", "metadata", stdout=out)

    assert out.getvalue().splitlines() == [
        f"Alpha (#{actors.team.pk}): store full, upstream redaction off",
        f"Alpha (#{actors.team.pk}): store metadata, upstream redaction off",
    ]
    event = AuditEvent.objects.get(action=AuditAction.STORE_MODE_CHANGED)
    assert (event.actor_name, event.detail["store_mode"]) == ("manage.py", "metadata")
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("team_settings", "--team", "Alpha", "--store", "all")


def test_gateway_key_create_takes_a_store_mode_redacted_by_default(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    for name, *store in (("ci",), ("audit", "--store", "metadata"), ("legacy", "--store", "team")):
        call_command(
            "gateway_key_create",
            "--team",
            "Alpha",
            "--name",
            name,
            *store,
            stdout=StringIO(),
            stderr=StringIO(),
        )

    modes = dict(ApiKey.objects.values_list("name", "store_mode"))
    assert modes == {"ci": "redacted", "audit": "metadata", "legacy": TEAM_STORE_MODE}


def test_the_key_form_sets_the_keys_mode_or_the_teams(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    owner = client_for(actors.owner)
    form = owner.get(f"/teams/{actors.team.pk}/api-keys/new/").content.decode()
    assert '<option value="redacted" selected>' in form

    owner.post(
        f"/teams/{actors.team.pk}/api-keys/new/",
        {"name": "follows", "connection": workers_connection.pk, "store_mode": "team"},
    )
    owner.post(
        f"/teams/{actors.team.pk}/api-keys/new/", {"name": "plain", "connection": workers_connection.pk}
    )

    assert dict(ApiKey.objects.values_list("name", "store_mode")) == {"follows": "", "plain": "redacted"}
    page = owner.get(f"/teams/{actors.team.pk}/api-keys/").content.decode()
    assert "records: the team's" in page and "records: redacted" in page


def test_an_owner_turns_upstream_redaction_on_and_off_on_the_data_page_audited_each_time(
    actors: Actors,
) -> None:
    owner = client_for(actors.owner)
    assert 'name="upstream_redaction"' in owner.get(data_url(actors)).content.decode()

    turned_on = owner.post(data_url(actors), {"form": "upstream", "upstream_redaction": "on"})
    assert turned_on.status_code == 302 and Team.objects.get(pk=actors.team.pk).upstream_redaction
    page = owner.get(data_url(actors)).content.decode()
    assert "with placeholders for sensitive values" in page
    assert 'name="upstream_redaction" id="id_upstream_redaction" checked' in page
    owner.post(data_url(actors), {"form": "upstream"})  # the box unticked

    assert not Team.objects.get(pk=actors.team.pk).upstream_redaction
    events = AuditEvent.objects.filter(action=AuditAction.UPSTREAM_REDACTION_CHANGED).order_by("id")
    assert [event.detail for event in events] == [
        {"previous": False, "upstream_redaction": True},
        {"previous": True, "upstream_redaction": False},
    ]
    assert Team.objects.get(pk=actors.team.pk).store_mode == StoreMode.FULL  # the other form untouched


def test_only_owners_change_upstream_redaction_and_others_read_it(actors: Actors) -> None:
    for who in (actors.admin, actors.teammate):
        refused = client_for(who).post(data_url(actors), {"form": "upstream", "upstream_redaction": "on"})
        assert refused.status_code == 403
    assert "Off: sent as written" in client_for(actors.teammate).get(data_url(actors)).content.decode()
    assert client_for(actors.outsider).post(data_url(actors), {"form": "upstream"}).status_code == 404
    assert not Team.objects.get(pk=actors.team.pk).upstream_redaction


def test_team_settings_turns_upstream_redaction_on_and_off(actors: Actors) -> None:
    out = StringIO()
    call_command("team_settings", "--team", "Alpha", "--upstream-redaction", "on", stdout=out)
    assert Team.objects.get(pk=actors.team.pk).upstream_redaction
    call_command("team_settings", "--team", "Alpha", "--upstream-redaction", "off", stdout=out)

    assert out.getvalue().splitlines()[0] == f"Alpha (#{actors.team.pk}): store full, upstream redaction on"
    assert out.getvalue().splitlines()[1].endswith("upstream redaction off")
    event = AuditEvent.objects.filter(action=AuditAction.UPSTREAM_REDACTION_CHANGED).first()
    assert event is not None and event.actor_name == "manage.py"
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("team_settings", "--team", "Alpha", "--upstream-redaction", "yes")
