"""Routing decisions sealed in a hash chain per team, a minute after the requests (issue 37):
the sealer seals each routed record once, two sealers take turns, and `verify_routing_chain`
finds a changed, deleted or slipped-in decision while counting retention's deletions and an
erasure's rewrites as accounted for."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import connections
from django.test import Client, override_settings

from playground.catalog.seed import KIMI_K25
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.calls.context import Attribution, RequestContext, RouteRecord
from playground.usage.erasure import end_user_erase
from playground.usage.metering import Outcome
from playground.usage.models import (
    RoutingSeal,
    RoutingSealChain,
    SealKind,
    TeamRetention,
    UsageRecord,
    UsageSource,
    UsageStatus,
)
from playground.usage.records import usage_record_create
from playground.usage.retention import retention_run
from playground.usage.routing_seals import routing_chain_verify, routing_seal_sweep, routing_seal_team
from playground.usage.tasks import routing_decisions_seal
from tests.support.actors import Actors
from tests.support.clock import clock
from tests.support.commands import command_exit, sql

NOW = dt.datetime(2026, 7, 15, 12, 0, tzinfo=dt.UTC)
PROMPT = "Refund order 7731 for ana.lima@example.com"
END_USER = "ana.lima-7731"


def _routed(
    actors: Actors, *, ago: dt.timedelta, rule: str = "cheap-first", end_user: str = ""
) -> UsageRecord:
    """A gateway request's record that the team's routing policy decided, written `ago` before NOW."""
    detail = {
        "rule": rule,
        "attempt": 2,
        "attempts": [
            {"target": "Primary/kimi", "status": 504, "ms": 30_000, "moved_on": "upstream_timeout"},
            {"target": "Backup/kimi", "status": None, "ms": 900, "moved_on": ""},
        ],
        "final": "Backup/kimi",
        "affinity_key": f"session-{end_user}" if end_user else "",
    }
    context = RequestContext(
        team_id=actors.team.pk,
        user_id=None,
        connection_id=None,
        model_id=KIMI_K25,
        request_body={"model": KIMI_K25, "messages": [{"role": "user", "content": PROMPT}]},
        attribution=Attribution(end_user=end_user),
        route=RouteRecord(rule=rule, fell_back=True, detail=detail),
    )
    outcome = Outcome(
        status=UsageStatus.OK,
        usage=NormalizedUsage(prompt_tokens=1200, completion_tokens=300, cached_tokens=0),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=300,
        latency_ms=900,
    )
    with clock(NOW - ago):
        return usage_record_create(context=context, outcome=outcome)


def _seal(team_id: int, *, at: dt.datetime = NOW) -> int:
    with clock(at):
        sealed, finished = routing_seal_team(team_id=team_id)
    assert finished
    return sealed


def _verify(team_id: int) -> tuple[int, str]:
    return command_exit("verify_routing_chain", team=str(team_id))


MINUTES = dt.timedelta(minutes=5)


@pytest.mark.django_db
def test_the_sealer_seals_each_settled_decision_once_and_keeps_no_text(actors: Actors) -> None:
    routed = [_routed(actors, ago=MINUTES * (3 - index)) for index in range(3)]
    fresh = _routed(actors, ago=dt.timedelta(seconds=10))  # younger than the settle time
    unrouted = _routed(actors, ago=MINUTES)
    UsageRecord.objects.filter(pk=unrouted.pk).update(routing=None)  # no policy decided it

    assert _seal(actors.team.pk) == 3
    assert _seal(actors.team.pk) == 0  # a second run seals nothing

    seals = list(RoutingSeal.objects.filter(team=actors.team).order_by("seq"))
    assert [seal.record_id for seal in seals] == [record.pk for record in routed]
    assert [seal.seq for seal in seals] == [1, 2, 3]
    assert [seal.request_id for seal in seals] == [record.request_id for record in routed]
    stored = " ".join(str(value) for seal in seals for value in seal.__dict__.values())
    assert "7731" not in stored and "Backup" not in stored and "cheap-first" not in stored
    head = RoutingSealChain.objects.get(team=actors.team)
    assert (head.length, head.last_sealed_at) == (3, NOW)
    assert head.sealed_until == NOW - dt.timedelta(seconds=60)

    code, output = _verify(actors.team.pk)
    assert code == 0, output
    assert "intact: 3 entries, 3 decisions match their seals" in output and "1 not sealed yet" in output

    assert _seal(actors.team.pk, at=NOW + dt.timedelta(minutes=2)) == 1  # the fresh one, now settled
    assert RoutingSeal.objects.get(team=actors.team, seq=4).record_id == fresh.pk
    assert routing_chain_verify(team_id=actors.team.pk).checked == 4
    assert routing_chain_verify(team_id=actors.other_team.pk).entries == 0


@pytest.mark.django_db
@override_settings(ROUTING_SEAL_BATCH=2)
def test_a_backlog_is_sealed_in_batches_resuming_where_the_last_stopped(actors: Actors) -> None:
    for index in range(5):
        _routed(actors, ago=dt.timedelta(days=3, minutes=-index))

    with clock(NOW):
        sealed, finished = routing_seal_team(team_id=actors.team.pk, deadline=0.0)  # stopped at once
    assert (sealed, finished) == (0, False)
    with clock(NOW):
        assert routing_seal_sweep() == (5, True)
    assert list(RoutingSeal.objects.filter(team=actors.team).values_list("seq", flat=True)) == [1, 2, 3, 4, 5]
    assert routing_chain_verify(team_id=actors.team.pk).intact


@pytest.mark.django_db
def test_a_decision_changed_in_sql_is_found_and_the_command_fails(actors: Actors) -> None:
    records = [_routed(actors, ago=MINUTES) for _ in range(3)]
    _seal(actors.team.pk)
    table = UsageRecord._meta.db_table
    sql(f"UPDATE {table} SET route_rule = %s WHERE id = %s", "premium-only", records[1].pk)

    code, output = _verify(actors.team.pk)

    assert code == 1
    assert f"record #{records[1].pk}" in output and "routing decision is not the one sealed" in output
    assert f"record #{records[0].pk}" not in output


@pytest.mark.django_db
def test_a_decision_deleted_or_slipped_in_by_hand_and_a_lost_entry_are_found(actors: Actors) -> None:
    records = [_routed(actors, ago=MINUTES) for _ in range(3)]
    _seal(actors.team.pk)
    UsageRecord.objects.filter(pk=records[0].pk).delete()  # not by retention
    slipped = _routed(actors, ago=dt.timedelta(hours=2))  # back-dated, behind the sealed point
    RoutingSeal.objects.filter(team=actors.team, seq=3).delete()

    report = routing_chain_verify(team_id=actors.team.pk)

    problems = "\n".join(report.problems)
    assert f"record #{records[0].pk} (sealed at entry 1) was deleted; no run removed it" in problems
    assert f"record #{slipped.pk}" in problems and "not sealed (slipped in)" in problems
    assert "the last ones are gone" in problems
    assert report.checked == 1


@pytest.mark.django_db
def test_decisions_deleted_by_retention_verify_as_accounted_for(actors: Actors) -> None:
    old = [_routed(actors, ago=dt.timedelta(days=40)) for _ in range(2)]
    kept = _routed(actors, ago=MINUTES)
    _seal(actors.team.pk)
    TeamRetention.objects.create(team=actors.team, record_days=32)

    with clock(NOW):
        assert retention_run(team_id=actors.team.pk).records_removed == 2

    assert not UsageRecord.objects.filter(pk__in=[record.pk for record in old]).exists()
    entry = RoutingSeal.objects.get(team=actors.team, kind=SealKind.RETENTION)
    assert entry.seq == 4 and entry.detail == {"decisions": 2, "record_ids": [old[0].pk, old[1].pk]}
    assert set(
        RoutingSeal.objects.filter(record_id__in=[r.pk for r in old]).values_list("salt", flat=True)
    ) == {""}
    code, output = _verify(actors.team.pk)
    assert code == 0, output
    assert "1 decisions match their seals, 2 deleted by retention" in output
    assert RoutingSeal.objects.get(record_id=kept.pk).salt != ""


@pytest.mark.django_db
def test_an_erased_end_users_decisions_verify_as_rewritten_and_are_sealed_again(actors: Actors) -> None:
    erased = _routed(actors, ago=MINUTES, end_user=END_USER)
    other = _routed(actors, ago=MINUTES, end_user="someone-else")
    _seal(actors.team.pk)
    old_seal = RoutingSeal.objects.get(record_id=erased.pk)

    assert end_user_erase(team_id=actors.team.pk, end_user=END_USER, dry_run=True)["routing_seals"] == 1
    counts = end_user_erase(team_id=actors.team.pk, end_user=END_USER)

    assert counts["routing_seals"] == 1
    routing = UsageRecord.objects.get(pk=erased.pk).routing
    assert routing is not None and END_USER not in str(routing)
    kinds = list(
        RoutingSeal.objects.filter(team=actors.team).order_by("seq").values_list("kind", "record_id")
    )
    assert kinds[2:] == [(SealKind.ERASURE, None), (SealKind.DECISION, erased.pk)]
    old_seal.refresh_from_db()
    assert old_seal.salt == ""  # its digest, of the id, matches nothing anyone can guess now
    report = routing_chain_verify(team_id=actors.team.pk)
    assert report.intact, report.problems
    assert (report.checked, report.rewritten_by_erasure) == (2, 1)
    assert end_user_erase(team_id=actors.team.pk, end_user=END_USER)["routing_seals"] == 0

    sql(f"UPDATE {UsageRecord._meta.db_table} SET route_fell_back = %s WHERE id = %s", False, other.pk)
    assert "routing decision is not the one sealed" in "\n".join(
        routing_chain_verify(team_id=actors.team.pk).problems
    )


@pytest.mark.django_db
def test_a_blanked_salt_that_no_run_accounts_for_is_found(actors: Actors) -> None:
    record = _routed(actors, ago=MINUTES)
    _seal(actors.team.pk)
    RoutingSeal.objects.filter(record_id=record.pk).update(salt="")

    assert (
        "salt was blanked, and no run removed its decision"
        in routing_chain_verify(team_id=actors.team.pk).problems[0]
    )


@pytest.mark.django_db(transaction=True)
@override_settings(ROUTING_SEAL_BATCH=7)
def test_two_concurrent_sealers_take_turns_and_do_not_fork_the_chain(actors: Actors) -> None:
    records = [_routed(actors, ago=dt.timedelta(minutes=30, seconds=-index)) for index in range(60)]
    sealers = 2
    start = threading.Barrier(sealers)
    sealed: list[int] = []
    failures: list[BaseException] = []

    def seal() -> None:
        try:
            start.wait()
            sealed.append(routing_seal_team(team_id=actors.team.pk)[0])
        except BaseException as exc:  # reported below, with the other thread's failure
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=seal) for _ in range(sealers)]
    with clock(NOW):  # every thread's clock
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert failures == []
    assert sum(sealed) == len(records)  # each record sealed by exactly one of them
    rows = list(RoutingSeal.objects.filter(team=actors.team).order_by("seq").values_list("seq", "record_id"))
    assert [seq for seq, _ in rows] == list(range(1, len(records) + 1))
    assert sorted(record_id or 0 for _, record_id in rows) == [record.pk for record in records]
    report = routing_chain_verify(team_id=actors.team.pk)
    assert report.intact and report.checked == len(records), report.problems


@pytest.mark.django_db
def test_the_beat_task_seals_and_the_audit_page_says_when(actors: Actors) -> None:
    _routed(actors, ago=MINUTES)
    client = Client()
    client.force_login(actors.viewer)
    page = client.get(f"/teams/{actors.team.pk}/audit/").content.decode()
    assert "Routing decisions are sealed in a chain of their own" in page and "none yet" in page

    with clock(NOW):
        assert routing_decisions_seal.apply().get() == 1

    page = client.get(f"/teams/{actors.team.pk}/audit/").content.decode()
    assert "1 entry, last sealed <time" in page
