"""The dashboard's "Redacted values by type": each record's counts summed per type and bucket, from
the records the request log's filters keep, scoped to the team."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.urls import reverse

from playground.accounts.models import StoreMode
from playground.analytics.filters import Filters, Period
from playground.analytics.selectors.redactions import redactions_over_time
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.lib.redaction import Redaction
from playground.usage.calls.context import Attribution, RequestContext
from playground.usage.models import RequestPath
from tests.support.actors import Actors
from tests.support.analytics import record_write
from tests.support.clients import client_for
from tests.support.clock import clock

pytestmark = pytest.mark.django_db

DAY = dt.datetime(2026, 11, 20, 9, tzinfo=dt.UTC)
EMAIL, CARD, PHONE = "ana.lima@example.com", "4111 1111 1111 1111", "+44 20 7946 0958"
KEY = "sk_live_" + "a1b2c3d4" * 3


def _write(
    actors: Actors, text: str, *, minutes: int, store: str = StoreMode.REDACTED, team: Any = None, **more: Any
) -> None:
    context = RequestContext(
        team_id=(team or actors.team).pk,
        user_id=actors.owner.pk,
        connection_id=None,
        model_id=ENGINE_MODEL_ID,
        request_body={"model": ENGINE_MODEL_ID, "messages": [{"role": "user", "content": text}]},
        store=store,
        **more,
    )
    record_write(
        DAY + dt.timedelta(minutes=minutes), context, prompt=100, cached=0, out=5, ttft=80, latency=200
    )


def _filters(actors: Actors, **more: Any) -> Filters:
    period = Period(start=DAY, end=DAY + dt.timedelta(hours=6), preset="custom", hourly=True)
    return Filters(team=actors.team, period=period, **more)


@pytest.fixture
def written(actors: Actors, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(actors, f"Mail {EMAIL} and {EMAIL}; card {CARD}", minutes=5)
    _write(actors, f"Call {PHONE}", minutes=40, path=RequestPath.GATEWAY)
    _write(actors, f"Key {KEY}, mail {EMAIL}", minutes=130)
    _write(actors, f"Not kept, not counted: {EMAIL}", minutes=133, store=StoreMode.METADATA)
    _write(actors, f"Kept in full: {EMAIL}", minutes=131, store=StoreMode.FULL)  # keeps no counts
    _write(actors, f"Another team's {EMAIL} {EMAIL} {EMAIL}", minutes=6, team=actors.other_team)
    with monkeypatch.context() as broken:
        broken.setattr(Redaction, "text", lambda self, text: 1 / 0)
        _write(actors, f"Choked on {EMAIL}", minutes=132)


def test_each_types_values_are_summed_per_bucket_for_the_team_only(actors: Actors, written: None) -> None:
    rows = redactions_over_time(_filters(actors))

    hour = DAY.replace(minute=0)
    assert [(row["bucket"] - hour, row["kind"], row["values"]) for row in rows] == [
        (dt.timedelta(0), "email", 2),
        (dt.timedelta(0), "card", 1),
        (dt.timedelta(0), "phone", 1),
        (dt.timedelta(hours=2), "secret", 1),
        (dt.timedelta(hours=2), "email", 1),
        (dt.timedelta(hours=2), "redactor_error", 1),
    ]


def test_the_log_filters_narrow_it(actors: Actors, written: None) -> None:
    gateway = redactions_over_time(_filters(actors, path=RequestPath.GATEWAY))

    assert [(row["kind"], row["values"]) for row in gateway] == [("phone", 1)]
    assert redactions_over_time(_filters(actors, model_id=ENGINE_MODEL_ID + "-other")) == []


def test_the_dashboard_panel_draws_them_and_says_the_totals(actors: Actors, written: None) -> None:
    with clock(DAY + dt.timedelta(hours=5)):
        response = client_for(actors.teammate).get(
            reverse("analytics:chart", args=["redactions"]), {"range": "24h", "team": str(actors.team.pk)}
        )
        page = client_for(actors.owner).get(reverse("analytics:dashboard"), {"team": str(actors.team.pk)})

    fragment = response.content.decode()
    assert response.status_code == 200
    assert (
        "6 values replaced by placeholders: e-mail addresses 3, phone numbers 1, card numbers 1, secrets 1; "
        "the redactor failed on 1 record, which kept metadata only." in fragment
    )
    assert "&quot;name&quot;: &quot;Redactor failures&quot;" in fragment
    assert "Redacted values by type" in page.content.decode()


def test_a_period_without_redactions_says_so_and_another_teams_is_a_404(
    actors: Actors, written: None
) -> None:
    with clock(DAY + dt.timedelta(days=3)):
        quiet = client_for(actors.owner).get(
            reverse("analytics:chart", args=["redactions"]), {"range": "24h"}
        )
        foreign = client_for(actors.outsider).get(
            reverse("analytics:chart", args=["redactions"]), {"range": "24h", "team": str(actors.team.pk)}
        )

    assert "Nothing was redacted in this period" in quiet.content.decode()
    assert foreign.status_code == 404


def test_an_end_user_filter_is_answered_from_the_records_over_the_whole_period(
    actors: Actors, written: None
) -> None:
    _write(actors, f"Ana's {PHONE} and {PHONE}", minutes=200, attribution=Attribution(end_user="ana"))
    with clock(DAY + dt.timedelta(hours=5)):
        response = client_for(actors.owner).get(
            reverse("analytics:chart", args=["redactions"]),
            {"range": "24h", "team": str(actors.team.pk), "end_user": "ana"},
        )

    assert response.status_code == 200  # the zoom to the active span reads rollups without end users
    assert "2 values replaced by placeholders: phone numbers 2." in response.content.decode()
