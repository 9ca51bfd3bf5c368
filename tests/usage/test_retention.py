"""Retention: a team's old records lose their text, older ones go, their rollups stay; a run works
in chunks, and one killed anywhere continues where it stopped with nothing done twice."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.conf import settings
from django.db import connection
from django.db.models import Sum

from playground.catalog.seed import KIMI_K25
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage import retention
from playground.usage.calls.context import RequestContext
from playground.usage.metering import Outcome
from playground.usage.models import TeamRetention, UsageDaily, UsageRecord, UsageSource, UsageStatus
from playground.usage.records import usage_record_create
from playground.usage.retention import retention_next_run, retention_run, retention_sweep
from playground.usage.rollups import rollups_rebuild
from playground.usage.tasks import retention_sweep as retention_sweep_task
from tests.support.actors import Actors
from tests.support.clock import clock
from tests.usage.test_rollups import snapshot, write_records

NOW = dt.datetime(2026, 7, 15, 12, 0, tzinfo=dt.UTC)
BODY = {"model": KIMI_K25, "messages": [{"role": "user", "content": "Ship it to ana.lima@example.com"}]}


def _record(actors: Actors, *, days_ago: float, team_id: int | None = None, body: bool = True) -> UsageRecord:
    """A priced record written by the one writer `days_ago` before NOW, with a body, variables
    and an error text unless `body` is False."""
    context = RequestContext(
        team_id=team_id or actors.team.pk,
        user_id=actors.owner.pk,
        connection_id=None,
        model_id=KIMI_K25,
        request_body=BODY if body else None,
        variables={"customer": "Ana"} if body else None,
    )
    outcome = Outcome(
        status=UsageStatus.UPSTREAM_ERROR if body else UsageStatus.OK,
        usage=NormalizedUsage(prompt_tokens=1200, completion_tokens=300, cached_tokens=200),
        usage_source=UsageSource.PROVIDER,
        error_code="bad_request" if body else "",
        error_text="the model refused: Ship it to ana.lima@example.com" if body else "",
        ttft_ms=300,
        latency_ms=900,
    )
    with clock(NOW - dt.timedelta(days=days_ago)):
        return usage_record_create(context=context, outcome=outcome)


def _keep(actors: Actors, *, body_days: int | None = None, record_days: int | None = None) -> None:
    TeamRetention.objects.update_or_create(
        team=actors.team, defaults={"body_days": body_days, "record_days": record_days}
    )


def _costs() -> list[tuple[int, Decimal, int, int]]:
    return list(
        UsageRecord.objects.order_by("pk").values_list(
            "pk", "total_cost", "prompt_tokens", "completion_tokens"
        )
    )


@pytest.fixture
def catalogue_seeded(catalogue: None) -> None:
    """The seeded price cards, so the records are priced."""


@pytest.mark.django_db
def test_body_retention_removes_exactly_the_old_texts_and_keeps_every_figure(
    actors: Actors, catalogue_seeded: None
) -> None:
    old = [_record(actors, days_ago=40), _record(actors, days_ago=30.5)]
    young = _record(actors, days_ago=29.5)
    textless = _record(actors, days_ago=40, body=False)
    other_team = _record(actors, days_ago=40, team_id=actors.other_team.pk)
    _keep(actors, body_days=30)
    costs, rollups = _costs(), snapshot()
    assert all(cost > 0 for _pk, cost, *_ in costs)

    with clock(NOW):
        outcome = retention_run(team_id=actors.team.pk)

    assert outcome.finished and (outcome.bodies_removed, outcome.records_removed) == (2, 0)
    for record in old:
        record.refresh_from_db()
        assert (record.request_body, record.variables, record.error_text) == (None, None, "")
        assert record.body_removed_by == "retention" and record.body_removed_at == NOW
        assert record.error_code and record.prefix_digest is not None  # the metadata stays
    for record in (young, other_team):
        record.refresh_from_db()
        assert record.request_body == BODY and record.error_text and record.body_removed_by == ""
    textless.refresh_from_db()
    assert textless.body_removed_by == ""  # it had no text to remove
    assert _costs() == costs and snapshot() == rollups
    state = TeamRetention.objects.get(pk=actors.team.pk)
    assert (state.run_bodies_removed, state.run_records_removed) == (2, 0)
    assert state.run_finished_at == NOW and not state.running


@pytest.mark.django_db
def test_record_retention_deletes_old_records_and_keeps_their_rollups_through_a_rebuild(
    actors: Actors, catalogue_seeded: None
) -> None:
    start = NOW - dt.timedelta(days=47)
    write_records(actors, count=200, seed=3, start=start)  # about two weeks, both teams
    _keep(actors, record_days=40)
    before = snapshot()
    team_cost = UsageDaily.objects.filter(team=actors.team).aggregate(e10=Sum("total_cost_e10"))["e10"]
    cutoff = dt.datetime(2026, 6, 5, tzinfo=dt.UTC)  # midnight UTC of NOW - 40 days
    doomed = UsageRecord.objects.filter(team=actors.team, created_at__lt=cutoff).count()
    kept = UsageRecord.objects.filter(team=actors.team, created_at__gte=cutoff).count()
    others = UsageRecord.objects.filter(team=actors.other_team).count()
    assert doomed > 20 and kept > 20

    with clock(NOW):
        outcome = retention_run(team_id=actors.team.pk, chunk=7)

    assert outcome.finished and outcome.records_removed == doomed
    assert UsageRecord.objects.filter(team=actors.team).count() == kept
    assert not UsageRecord.objects.filter(team=actors.team, created_at__lt=cutoff).exists()
    assert UsageRecord.objects.filter(team=actors.other_team).count() == others
    state = TeamRetention.objects.get(pk=actors.team.pk)
    assert state.run_records_removed == doomed and state.records_removed_before == cutoff
    # The dashboard's sums are untouched, and a rebuild from the records left recomputes only
    # the days after the cut: past months still add up to the same cost.
    assert snapshot() == before
    rollups_rebuild()
    assert snapshot() == before
    rollups_rebuild(team_id=actors.team.pk)
    assert snapshot() == before
    assert (
        UsageDaily.objects.filter(team=actors.team).aggregate(e10=Sum("total_cost_e10"))["e10"] == team_cost
    )


class Killed(Exception):
    """What a worker killed mid-run looks like to the code after it: nothing more runs."""


def _dies_on_the_third(real: Any) -> Any:
    calls = {"n": 0}

    def chunk(*args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise Killed
        return real(*args)

    return chunk


@pytest.mark.django_db
def test_a_killed_run_continues_where_it_stopped_with_its_cutoffs_and_nothing_twice(
    actors: Actors, catalogue_seeded: None
) -> None:
    for n in range(7):
        _record(actors, days_ago=31 + n / 10)
    borderline = _record(actors, days_ago=29.5)  # old enough only by the next day's cut-off
    _keep(actors, body_days=30)
    dying = _dies_on_the_third(retention._bodies_remove_chunk)

    with clock(NOW), mock.patch.object(retention, "_bodies_remove_chunk", dying), pytest.raises(Killed):
        retention_run(team_id=actors.team.pk, chunk=2)

    state = TeamRetention.objects.get(pk=actors.team.pk)
    assert state.running and state.run_bodies_removed == 4
    assert UsageRecord.objects.filter(body_removed_by="retention").count() == 4

    with clock(NOW + dt.timedelta(days=1)):  # the next day's call continues the same run
        outcome = retention_run(team_id=actors.team.pk, chunk=2)

    assert outcome.finished and outcome.bodies_removed == 3
    state = TeamRetention.objects.get(pk=actors.team.pk)
    assert state.run_bodies_removed == 7 and state.run_started_at == NOW
    assert UsageRecord.objects.filter(body_removed_by="retention", body_removed_at=NOW).count() == 4
    borderline.refresh_from_db()
    assert borderline.request_body == BODY  # younger than the run's cut-off, taken when it began

    with clock(NOW + dt.timedelta(days=1)):  # a new run, with the day's cut-off
        outcome = retention_run(team_id=actors.team.pk, chunk=2)

    borderline.refresh_from_db()
    assert outcome.bodies_removed == 1 and borderline.body_removed_by == "retention"
    assert TeamRetention.objects.get(pk=actors.team.pk).run_bodies_removed == 1


@pytest.mark.django_db
def test_a_run_killed_while_deleting_records_continues_and_counts_each_once(
    actors: Actors, catalogue_seeded: None
) -> None:
    for n in range(9):
        _record(actors, days_ago=70 + n)
    young = _record(actors, days_ago=5)
    _keep(actors, record_days=40)
    dying = _dies_on_the_third(retention._records_delete_chunk)

    with clock(NOW), mock.patch.object(retention, "_records_delete_chunk", dying), pytest.raises(Killed):
        retention_run(team_id=actors.team.pk, chunk=2)
    assert TeamRetention.objects.get(pk=actors.team.pk).run_records_removed == 4
    assert UsageRecord.objects.filter(team=actors.team).count() == 6

    with clock(NOW + dt.timedelta(hours=1)):
        outcome = retention_run(team_id=actors.team.pk, chunk=2)

    assert outcome.finished and outcome.records_removed == 5
    state = TeamRetention.objects.get(pk=actors.team.pk)
    assert state.run_records_removed == 9 and state.run_started_at == NOW
    assert list(UsageRecord.objects.filter(team=actors.team).values_list("pk", flat=True)) == [young.pk]


@pytest.mark.django_db
def test_a_run_past_its_deadline_stops_between_chunks_and_the_next_call_finishes_it(
    actors: Actors, catalogue_seeded: None
) -> None:
    for n in range(5):
        _record(actors, days_ago=31 + n)
    _keep(actors, body_days=30)

    with clock(NOW):
        first = retention_run(team_id=actors.team.pk, deadline=0.0, chunk=2)
        second = retention_run(team_id=actors.team.pk, chunk=2)

    assert not first.finished and first.bodies_removed == 0
    assert second.finished and second.bodies_removed == 5


@pytest.mark.django_db
def test_a_team_that_keeps_everything_has_no_run(actors: Actors, catalogue_seeded: None) -> None:
    record = _record(actors, days_ago=400)
    _keep(actors)

    with clock(NOW):
        assert retention_sweep() is True

    record.refresh_from_db()
    assert record.request_body == BODY
    assert TeamRetention.objects.get(pk=actors.team.pk).run_started_at is None


def test_the_beat_runs_the_sweep_daily_at_the_set_time() -> None:
    assert settings.CELERY_BEAT_SCHEDULE["usage-retention"]["task"] == retention_sweep_task.name
    hour, minute = settings.RETENTION_AT_UTC
    before = dt.datetime(2026, 7, 15, hour, minute, tzinfo=dt.UTC) - dt.timedelta(minutes=1)
    assert retention_next_run(before) == before + dt.timedelta(minutes=1)
    assert retention_next_run(before + dt.timedelta(minutes=1)) == before + dt.timedelta(days=1, minutes=1)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the files of a SQLite database")
@pytest.mark.django_db(transaction=True)
def test_after_a_sweep_a_removed_text_is_in_no_file_of_the_database(
    actors: Actors, catalogue_seeded: None
) -> None:
    planted = f"planted-{uuid.uuid4().hex}"
    body = {"model": KIMI_K25, "messages": [{"role": "user", "content": planted}]}
    context = RequestContext(
        team_id=actors.team.pk, user_id=None, connection_id=None, model_id=KIMI_K25, request_body=body
    )
    outcome = Outcome(
        status=UsageStatus.OK,
        usage=NormalizedUsage(prompt_tokens=5, completion_tokens=1),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=None,
        latency_ms=100,
    )
    with clock(NOW - dt.timedelta(days=10)):
        usage_record_create(context=context, outcome=outcome)
    _keep(actors, body_days=7)
    main = Path(connection.settings_dict["NAME"])
    files = (main, main.with_name(main.name + "-wal"))
    assert any(planted.encode() in path.read_bytes() for path in files if path.exists())

    with clock(NOW):
        retention_sweep()

    assert not any(planted.encode() in path.read_bytes() for path in files if path.exists())
