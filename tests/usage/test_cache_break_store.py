"""Cache breaks found when a record is written (issue 40): the same the replay finds, refilled by
the rebuild, read by the chart in a fixed number of queries, and gone with their records."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from playground.accounts.models import StoreMode
from playground.analytics.filters import Filters, Period
from playground.analytics.selectors.cache_breaks import cache_breaks_over_time
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.calls.context import Attribution, RequestContext
from playground.usage.erasure import end_user_erase
from playground.usage.insights.cache_break_selectors import team_breaks
from playground.usage.insights.cache_break_store import kept_team_breaks
from playground.usage.insights.cache_breaks import Cause
from playground.usage.metering import Outcome
from playground.usage.models import (
    TeamRetention,
    UsageCacheBreak,
    UsageCacheBreakHourly,
    UsageRecord,
    UsageSource,
    UsageStatus,
)
from playground.usage.records import usage_records_create_many
from playground.usage.retention import retention_run
from tests.support.actors import Actors
from tests.support.analytics import record_write
from tests.support.clock import clock

DAY = dt.datetime(2026, 11, 20, 9, tzinfo=dt.UTC)
TOOLS = [{"type": "function", "function": {"name": name}} for name in ("lookup_order", "refund")]
QUESTION = {"role": "user", "content": "Where is order 7?"}
SYSTEM = {"role": "system", "content": "You answer order questions."}
FIRST = {"model": ENGINE_MODEL_ID, "messages": [SYSTEM, QUESTION], "tools": TOOLS}
NEXT = [{"role": "assistant", "content": "Shipped."}, {"role": "user", "content": "Refund it."}]
SECOND = {**FIRST, "messages": [SYSTEM, QUESTION, *NEXT]}
# cause -> (the second request's body, its model, its affinity key)
CASES: dict[Cause, tuple[dict[str, Any], str, str]] = {
    Cause.MODEL_CHANGED: (SECOND, "another-model", "aff"),
    Cause.TOOLS_CHANGED: ({**SECOND, "tools": TOOLS[::-1]}, ENGINE_MODEL_ID, "aff"),
    Cause.SYSTEM_CHANGED: (
        {**SECOND, "messages": [{"role": "system", "content": "Be brief."}, QUESTION, *NEXT]},
        ENGINE_MODEL_ID,
        "aff",
    ),
    Cause.FORMAT_CHANGED: ({**SECOND, "response_format": {"type": "json_object"}}, ENGINE_MODEL_ID, "aff"),
    Cause.HISTORY_CHANGED: (
        {**SECOND, "messages": [SYSTEM, {"role": "user", "content": "Where is order 8?"}, *NEXT]},
        ENGINE_MODEL_ID,
        "aff",
    ),
    Cause.AFFINITY_MISSING: (SECOND, ENGINE_MODEL_ID, ""),
    Cause.AFFINITY_CHANGED: (SECOND, ENGINE_MODEL_ID, "aff-2"),
    Cause.EVICTED: (SECOND, ENGINE_MODEL_ID, "aff"),
}


def _session(
    actors: Actors,
    session: str,
    cause: Cause,
    *,
    at: dt.datetime = DAY,
    end_user: str = "",
    store: str = "",
) -> tuple[UsageRecord, UsageRecord]:
    """Two requests of a gateway session; the second loses its prefix for `cause`."""
    second_body, model, affinity = CASES[cause]
    written = []
    for turn, (body, model_id, key, cached) in enumerate(
        ((FIRST, ENGINE_MODEL_ID, "aff", 0), (second_body, model, affinity, 7))
    ):
        context = RequestContext(
            team_id=actors.team.pk,
            user_id=actors.owner.pk,
            connection_id=None,
            model_id=model_id,
            affinity_key=key,
            attribution=Attribution(session=session, end_user=end_user),
            request_body=body,
            store=store,
        )
        written.append(
            record_write(
                at + dt.timedelta(minutes=turn),
                context,
                prompt=900 + 100 * turn,
                cached=cached,
                out=5,
                ttft=100,
                latency=300,
            )
        )
    return written[0], written[1]


def _kept() -> list[tuple[Any, ...]]:
    return sorted(
        UsageCacheBreak.objects.values_list(
            "record_id", "previous_record_id", "cause", "detail", "cached_tokens", "lost_usd", "changed_turn"
        )
    )


def _hours() -> list[tuple[Any, ...]]:
    return sorted(
        UsageCacheBreakHourly.objects.values_list("bucket", "cause", "breaks", "lost_tokens", "lost_e10")
    )


def _period(actors: Actors) -> Filters:
    start, end = DAY - dt.timedelta(hours=3), DAY + dt.timedelta(hours=3)
    return Filters(team=actors.team, period=Period(start=start, end=end, preset="custom", hourly=True))


@pytest.mark.django_db
def test_each_break_found_at_write_time_is_the_one_the_replay_finds(actors: Actors) -> None:
    for n, cause in enumerate(CASES):
        _session(actors, f"s-{n}", cause, at=DAY + dt.timedelta(minutes=5 * n))

    kept = list(kept_team_breaks(team_id=actors.team.pk, since=DAY))
    replayed = list(team_breaks(team_id=actors.team.pk, since=DAY))
    assert sorted(each.cause for each in kept) == sorted(CASES)
    # The turn is counted from the session's start where it is shown (`with_turn`).
    assert [replace(each, turn=0) for each in kept] == [replace(each, turn=0) for each in replayed]


@pytest.mark.django_db
def test_the_rebuild_fills_past_records_as_the_writer_would_have(actors: Actors) -> None:
    for n, cause in enumerate(CASES):
        _session(actors, f"s-{n}", cause, at=DAY + dt.timedelta(hours=n))
    _session(actors, "yesterday", Cause.EVICTED, at=DAY - dt.timedelta(days=1))
    written, hours = _kept(), _hours()
    assert len(written) == len(CASES) + 1
    # Records written before breaks were kept: none is, until the rebuild.
    UsageCacheBreak.objects.all().delete()
    UsageCacheBreakHourly.objects.all().delete()

    out = StringIO()
    call_command("rebuild_cache_breaks", "--team", str(actors.team.pk), stdout=out)

    assert (_kept(), _hours()) == (written, hours)
    assert f"team {actors.team.pk}: {len(CASES) + 1} breaks over 2 days" in out.getvalue()
    # Resumed from a day: that day and after are recomputed, the days before left as they were.
    UsageCacheBreak.objects.filter(created_at__gte=DAY - dt.timedelta(hours=12)).delete()
    call_command("rebuild_cache_breaks", "--since", f"{DAY:%Y-%m-%d}", stdout=StringIO())
    assert (_kept(), _hours()) == (written, hours)


@pytest.mark.django_db
def test_the_rebuild_reads_records_kept_before_digests_from_their_bodies(actors: Actors) -> None:
    _session(actors, "old", Cause.TOOLS_CHANGED)
    UsageRecord.objects.update(prefix_digest=None)
    UsageCacheBreak.objects.all().delete()
    UsageCacheBreakHourly.objects.all().delete()

    call_command("rebuild_cache_breaks", stdout=StringIO())

    assert [row[2] for row in _kept()] == [Cause.TOOLS_CHANGED]


@pytest.mark.django_db
def test_the_chart_reads_the_same_few_rows_however_many_records_broke(
    actors: Actors, django_assert_num_queries: Any
) -> None:
    _session(actors, "s-0", Cause.EVICTED)
    with django_assert_num_queries(1):
        assert [row["breaks"] for row in cache_breaks_over_time(_period(actors))] == [1]
    for n in range(1, 12):
        _session(actors, f"s-{n}", list(CASES)[n % len(CASES)], at=DAY + dt.timedelta(minutes=n))

    with django_assert_num_queries(1):  # the hourly sums by cause, not the records
        rows = cache_breaks_over_time(_period(actors))
    assert sum(row["breaks"] for row in rows) == 12
    # A filter reads the kept breaks of the records it keeps: the same figures.
    filtered = cache_breaks_over_time(replace(_period(actors), status=UsageStatus.OK))
    assert filtered == rows
    model_only = cache_breaks_over_time(replace(_period(actors), model_id="another-model"))
    assert [(row["cause"], row["breaks"]) for row in model_only] == [("model_changed", 1)]


@pytest.mark.django_db
def test_a_failed_or_fully_cached_record_costs_the_writer_no_look_up(actors: Actors) -> None:
    _session(actors, "s", Cause.EVICTED)
    context = RequestContext(
        team_id=actors.team.pk,
        user_id=actors.owner.pk,
        connection_id=None,
        model_id=ENGINE_MODEL_ID,
        affinity_key="aff",
        attribution=Attribution(session="s"),
        request_body=SECOND,
    )
    with CaptureQueriesContext(connection) as written:
        record_write(DAY, context, prompt=1300, cached=1290, out=1, ttft=1, latency=1)  # cached in full
        record_write(
            DAY, context, prompt=1300, cached=0, out=1, ttft=1, latency=1, status=UsageStatus.TIMEOUT
        )
    statements = [query["sql"].lower() for query in written.captured_queries]
    assert not [sql for sql in statements if sql.startswith("select") and "usage_usagerecord" in sql]
    assert not [sql for sql in statements if "usagecachebreak" in sql]
    assert len(_kept()) == 1


@pytest.mark.django_db
def test_retention_deletes_the_breaks_of_the_records_it_deletes_and_keeps_their_hours(actors: Actors) -> None:
    now = DAY + dt.timedelta(days=60)
    _, old = _session(actors, "old", Cause.EVICTED)
    _, recent = _session(actors, "recent", Cause.EVICTED, at=now - dt.timedelta(days=1))
    TeamRetention.objects.update_or_create(team=actors.team, defaults={"record_days": 30})

    with clock(now):
        assert retention_run(team_id=actors.team.pk).finished

    assert not UsageRecord.objects.filter(pk=old.pk).exists()
    assert [row[0] for row in _kept()] == [recent.pk]
    assert [row[2] for row in _hours()] == [1, 1]  # the hours stay, as the other rollups do


@pytest.mark.django_db
def test_an_erased_end_users_break_keeps_its_figures_but_not_the_id(actors: Actors) -> None:
    end_user = "ana.lima@example.com"
    _session(actors, end_user, Cause.EVICTED, end_user=end_user)

    end_user_erase(team_id=actors.team.pk, end_user=end_user)

    (found,) = kept_team_breaks(team_id=actors.team.pk, since=DAY)
    assert found.cause == Cause.EVICTED
    assert end_user not in found.session and found.session.startswith("session:erased:")
    assert not any(end_user in str(value) for row in _kept() for value in row)


@pytest.mark.django_db
def test_metadata_records_keep_their_breaks(actors: Actors) -> None:
    _session(actors, "s", Cause.TOOLS_CHANGED, store=StoreMode.METADATA)
    assert [row[2] for row in _kept()] == [Cause.TOOLS_CHANGED]


@pytest.mark.django_db
def test_records_settled_together_find_their_breaks_in_one_look_up(actors: Actors) -> None:
    """A settled group (`usage_records_create_many`) reads its sessions' requests in one query
    and keeps what the replay finds, with two records of one session in the group."""
    for n, cause in enumerate(CASES):
        _session(actors, f"s-{n}", cause)
    settled = []
    for n, (body, model, affinity) in enumerate([*CASES.values(), CASES[Cause.EVICTED]]):
        context = RequestContext(
            team_id=actors.team.pk,
            user_id=actors.owner.pk,
            connection_id=None,
            model_id=model,
            affinity_key=affinity,
            attribution=Attribution(session=f"s-{n % len(CASES)}"),
            request_body=body,
        )
        usage = NormalizedUsage(prompt_tokens=1100 + n, completion_tokens=5, cached_tokens=9)
        outcome = Outcome(UsageStatus.OK, usage, UsageSource.PROVIDER, ttft_ms=100, latency_ms=300)
        settled.append((context, outcome))

    with (
        clock(DAY + dt.timedelta(minutes=5)),
        CaptureQueriesContext(connection) as written,
        transaction.atomic(),
    ):
        usage_records_create_many(settled)

    statements = [query["sql"].lower() for query in written.captured_queries]
    assert len([sql for sql in statements if sql.startswith("select") and "usage_usagerecord" in sql]) == 1
    kept = sorted(kept_team_breaks(team_id=actors.team.pk, since=DAY), key=lambda each: each.record_id)
    replayed = sorted(team_breaks(team_id=actors.team.pk, since=DAY), key=lambda each: each.record_id)
    assert len(kept) == 2 * len(CASES) + 1  # each second turn, each third, and the group's fourth
    assert [replace(each, turn=0) for each in kept] == [replace(each, turn=0) for each in replayed]
