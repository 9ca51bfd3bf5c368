"""Retention set where people set it: the team's Data page and `manage.py team_settings`; the
page shows it with the next run and what the last one removed; a record says its text went."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from playground.accounts.models import AuditAction, AuditEvent
from playground.usage.models import TeamRetention, UsageRecord, UsageStatus
from playground.usage.retention import retention_run
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.clock import clock

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 7, 15, 12, 0, tzinfo=dt.UTC)


def retention_url(actors: Actors) -> str:
    return f"/teams/{actors.team.pk}/data/retention/"


def data_url(actors: Actors) -> str:
    return f"/teams/{actors.team.pk}/data/"


def _days(actors: Actors) -> tuple[int | None, int | None]:
    state = TeamRetention.objects.get(pk=actors.team.pk)
    return state.body_days, state.record_days


def test_an_owner_sets_the_retention_on_the_data_page_and_it_is_audited(actors: Actors) -> None:
    owner = client_for(actors.owner)
    assert "kept as long as their records" in owner.get(data_url(actors)).content.decode()

    response = owner.post(retention_url(actors), {"body_days": "30", "record_days": "400"})

    assert response.status_code == 302 and _days(actors) == (30, 400)
    event = AuditEvent.objects.get(action=AuditAction.RETENTION_CHANGED)
    assert event.actor == actors.owner
    assert event.detail == {
        "previous": {"body_days": None, "record_days": None},
        "body_days": 30,
        "record_days": 400,
    }
    page = owner.get(data_url(actors)).content.decode()
    assert "removed after 30 days" in page and "deleted after 400 days" in page
    assert 'name="body_days" id="id_body_days" value="30"' in page

    owner.post(retention_url(actors), {"body_days": "", "record_days": ""})
    assert _days(actors) == (None, None)
    assert AuditEvent.objects.filter(action=AuditAction.RETENTION_CHANGED).count() == 2


def test_only_owners_set_it_outsiders_see_nothing_and_bad_days_are_refused_with_the_form_kept(
    actors: Actors,
) -> None:
    assert client_for(actors.admin).post(retention_url(actors), {"body_days": "30"}).status_code == 403
    assert client_for(actors.teammate).post(retention_url(actors), {"body_days": "30"}).status_code == 403
    assert client_for(actors.outsider).post(retention_url(actors), {"body_days": "30"}).status_code == 404
    assert "Owners change this" in client_for(actors.admin).get(data_url(actors)).content.decode()

    owner = client_for(actors.owner)
    too_short = owner.post(retention_url(actors), {"body_days": "7", "record_days": "10"})
    assert too_short.status_code == 400
    page = too_short.content.decode()
    assert "Records are kept from 32" in page and 'value="10"' in page
    not_a_number = owner.post(retention_url(actors), {"body_days": "soon"})
    assert not_a_number.status_code == 400 and "Enter a whole number" in not_a_number.content.decode()
    assert not TeamRetention.objects.filter(body_days__isnull=False).exists()


def test_the_command_sets_and_prints_the_retention(actors: Actors) -> None:
    out = StringIO()
    call_command("team_settings", "--team", "Alpha", "--body-retention-days", "14", stdout=out)
    assert "retention: texts 14 days, records kept" in out.getvalue()

    call_command("team_settings", "--team", "Alpha", "--record-retention-days", "90", stdout=out)
    assert _days(actors) == (14, 90)  # an option not given keeps its value
    event = AuditEvent.objects.filter(action=AuditAction.RETENTION_CHANGED).latest("pk")
    assert event.actor is None and event.actor_name == "manage.py"

    call_command("team_settings", "--team", "Alpha", "--body-retention-days", "0", stdout=out)
    assert _days(actors) == (None, 90)
    with pytest.raises(CommandError, match="Records are kept from 32"):
        call_command("team_settings", "--team", "Alpha", "--record-retention-days", "5")
    assert _days(actors) == (None, 90)


def test_the_page_shows_the_next_run_and_what_the_last_one_removed(actors: Actors) -> None:
    with clock(NOW - dt.timedelta(days=20)):
        record = UsageRecord.objects.create(
            team=actors.team, model_id="m", status=UsageStatus.OK, request_body={"messages": []}
        )
    TeamRetention.objects.create(team=actors.team, body_days=7)
    with clock(NOW):
        retention_run(team_id=actors.team.pk)
        page = client_for(actors.viewer).get(data_url(actors)).content.decode()

    assert '<time datetime="2026-07-16T03:17:00+00:00">2026-07-16 03:17 UTC</time>' in page
    assert "2026-07-15 12:00 UTC: 1 text removed, 0 records deleted" in page

    detail = client_for(actors.owner).get(f"/usage/log/{record.request_id}/").content.decode()
    assert "text removed by the team&#x27;s retention on 2026-07-15" in detail
    assert "Removed on 2026-07-15 by the team&#x27;s retention" in detail
