"""Rollups kept on write equal rollups rebuilt from the raw rows, and lose no concurrent increment."""

from __future__ import annotations

import datetime as dt
import random
import threading
from typing import Any

import pytest
from django.db import connection, connections
from django.db.models import Sum

from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K25, KIMI_K26
from playground.chat.models import Conversation
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.api_keys import api_key_issue
from playground.usage.calls.context import Attribution, RequestContext
from playground.usage.metering import Outcome
from playground.usage.models import (
    HISTOGRAM_EDGES_MS,
    LATENCY_COLUMNS,
    TTFT_COLUMNS,
    UsageDaily,
    UsageEndUserDaily,
    UsageEndUserHourly,
    UsageHourly,
    UsageKeyDaily,
    UsageKeyHourly,
    UsagePresetDaily,
    UsagePresetHourly,
    UsageRecord,
    UsageSource,
    UsageStatus,
)
from playground.usage.records import usage_record_create, usage_records_create_many
from playground.usage.rollups import ROLLUP_MODELS, histogram_bucket, rollups_rebuild
from tests.support.clock import clock

START = dt.datetime(2026, 5, 28, 22, 30, tzinfo=dt.UTC)  # spans K2.5's retirement on 2026-05-30


def snapshot() -> dict[str, list[tuple[Any, ...]]]:
    tables = {}
    for model in ROLLUP_MODELS:
        names = [f.attname for f in model._meta.concrete_fields if f.attname != "id"]
        tables[model.__name__] = sorted(model.objects.values_list(*names))
    return tables


def outcome(rng: random.Random) -> Outcome:
    status = rng.choice([UsageStatus.OK] * 6 + [UsageStatus.UPSTREAM_ERROR, UsageStatus.CLIENT_DISCONNECTED])
    prompt = rng.randint(1, 60_000)
    cached = rng.choice([None, 0, rng.randint(0, prompt)])
    written = rng.choice([None, 0, rng.randint(0, prompt - (cached or 0))])
    return Outcome(
        status=status,
        usage=NormalizedUsage(
            prompt_tokens=prompt,
            completion_tokens=rng.randint(0, 3000),
            cached_tokens=cached,
            cache_write_tokens=written,
        ),
        usage_source=UsageSource.PROVIDER,
        # edges too: a bucket boundary must fall on the same side in both paths
        ttft_ms=rng.choice([None, rng.randint(0, 90_000), rng.choice(HISTOGRAM_EDGES_MS)]),
        latency_ms=rng.choice([rng.randint(0, 200_000), rng.choice(HISTOGRAM_EDGES_MS)]),
    )


def write_records(
    actors: Any, *, count: int, seed: int, start: dt.datetime, group_sizes: tuple[int, ...] = ()
) -> None:
    """`count` random records, one at a time, or with `group_sizes` in groups of those sizes
    written together (`usage_records_create_many`, as the settle queue writes them)."""
    rng = random.Random(seed)
    group: list[tuple[RequestContext, Outcome]] = []
    size = rng.choice(group_sizes) if group_sizes else 1
    conversations = [
        Conversation.objects.create(team=actors.team, user=actors.owner, model_id=KIMI_K25) for _ in range(3)
    ]
    keys = {
        team.pk: [
            api_key_issue(team_id=team.pk, name=f"{seed}-{n}", connection_id=None, created_by_id=None)[0].pk
            for n in range(2)
        ]
        for team in (actors.team, actors.other_team)
    }
    at = start
    for n in range(count):
        at += dt.timedelta(minutes=rng.randint(1, 200))
        team_id = rng.choice([actors.team.pk, actors.other_team.pk])
        path = rng.choice(["chat", "batch", "gateway", "gateway"])
        attribution = Attribution()
        if path == "gateway":  # a key always; an end user often, "" (none) otherwise
            attribution = Attribution(
                api_key_id=rng.choice(keys[team_id]), end_user=rng.choice(["", "ana", "bo", "cy"])
            )
        context = RequestContext(
            team_id=team_id,
            user_id=rng.choice([actors.owner.pk, actors.teammate.pk, None]),
            connection_id=None,
            model_id=rng.choice([KIMI_K25, KIMI_K26, ENGINE_MODEL_ID, "@local/unpriced"]),
            conversation_id=rng.choice([None, *(c.pk for c in conversations)]) if path == "chat" else None,
            preset_version_id=rng.choice([None, 11, 12]) if path != "gateway" else None,
            affinity_key=rng.choice(["", "conv-1"]),
            path=path,
            attribution=attribution,
        )
        if not group_sizes:
            with clock(at):
                usage_record_create(context=context, outcome=outcome(rng))
            continue
        group.append((context, outcome(rng)))
        if len(group) == size or n == count - 1:
            with clock(at):
                usage_records_create_many(group)
            group, size = [], rng.choice(group_sizes)


@pytest.mark.django_db
def test_rollups_kept_on_write_equal_the_rebuild_from_raw_rows(actors: Any) -> None:
    write_records(actors, count=250, seed=7, start=START)
    incremental = snapshot()
    assert len(incremental["UsageHourly"]) > 100 and len(incremental["UsageConversationDaily"]) > 3
    # the team-level tables really fold users together, and conversations span several days
    assert len(incremental["UsageTeamDaily"]) < len(incremental["UsageDaily"])
    assert len(incremental["UsagePeopleDaily"]) < len(incremental["UsageDaily"])
    assert any(first != last for _, _, first, last, *_ in incremental["UsageConversationTotal"])
    # the gateway's tables hold its requests only, and the key tables fold end users together
    gateway = UsageDaily.objects.filter(path="gateway").aggregate(n=Sum("requests"))["n"]
    for table in (UsageKeyHourly, UsageKeyDaily, UsageEndUserHourly, UsageEndUserDaily):
        assert table.objects.aggregate(n=Sum("requests"))["n"] == gateway > 50
    assert 0 < len(incremental["UsageKeyDaily"]) < len(incremental["UsageEndUserDaily"])
    # the tables by preset version hold the requests that name one, and only those
    named = UsageRecord.objects.filter(preset_version_id__isnull=False).count()
    for preset_table in (UsagePresetHourly, UsagePresetDaily):
        assert preset_table.objects.aggregate(n=Sum("requests"))["n"] == named > 30
    # cache writes are counted and priced apart, as the records hold them
    written = UsageRecord.objects.aggregate(n=Sum("cache_write_tokens"), usd=Sum("cache_write_cost"))
    sums = UsageDaily.objects.aggregate(n=Sum("cache_write_tokens"), e10=Sum("cache_write_cost_e10"))
    assert sums["n"] == written["n"] > 0 and sums["e10"] > 0
    assert abs(sums["e10"] - written["usd"] * 10**10) < 1

    rollups_rebuild()

    assert snapshot() == incremental


@pytest.mark.django_db
def test_records_written_in_groups_add_to_the_rollups_what_the_rebuild_counts(actors: Any) -> None:
    """A group adds one upsert per bucket, its records' measures summed and a conversation's
    first and last day kept: the same rows as writing them one by one."""
    write_records(actors, count=250, seed=11, start=START, group_sizes=(1, 3, 8, 20))
    grouped = snapshot()
    assert UsageRecord.objects.count() == 250
    assert UsageDaily.objects.aggregate(n=Sum("requests"))["n"] == 250
    assert any(first != last for _, _, first, last, *_ in grouped["UsageConversationTotal"])

    rollups_rebuild()

    assert snapshot() == grouped


@pytest.mark.django_db
def test_writes_after_a_rebuild_land_in_the_rebuilt_rows(actors: Any) -> None:
    """The rebuild writes bucket keys exactly as the writer does, or later upserts would duplicate rows."""
    write_records(actors, count=60, seed=1, start=START)
    rollups_rebuild()
    write_records(actors, count=60, seed=2, start=START)  # the same hours again
    incremental = snapshot()

    rollups_rebuild()

    assert snapshot() == incremental


@pytest.mark.django_db
def test_a_rebuild_of_one_team_leaves_the_others_rollups_alone(actors: Any) -> None:
    write_records(actors, count=80, seed=3, start=START)
    ours = sorted(UsageDaily.objects.filter(team=actors.team).values_list("bucket", "requests"))
    UsageDaily.objects.filter(team=actors.other_team).update(requests=999)
    UsageDaily.objects.filter(team=actors.team).update(requests=0)

    rollups_rebuild(team_id=actors.team.pk)

    assert not UsageDaily.objects.filter(team=actors.other_team).exclude(requests=999).exists()
    rebuilt = UsageDaily.objects.filter(team=actors.team).values("bucket").annotate(n=Sum("requests"))
    assert sorted((row["bucket"], row["n"]) for row in rebuilt) == _per_bucket(ours)


def _per_bucket(rows: list[tuple[dt.datetime, int]]) -> list[tuple[dt.datetime, int]]:
    totals: dict[dt.datetime, int] = {}
    for bucket, requests in rows:
        totals[bucket] = totals.get(bucket, 0) + requests
    return sorted(totals.items())


@pytest.mark.django_db
def test_one_record_lands_in_its_hour_and_day_with_its_histogram_buckets(actors: Any) -> None:
    at = dt.datetime(2026, 11, 2, 13, 47, 5, tzinfo=dt.UTC)
    result = Outcome(
        status=UsageStatus.OK,
        usage=NormalizedUsage(prompt_tokens=2000, cached_tokens=1500, completion_tokens=100),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=420,
        latency_ms=2600,
    )
    context = RequestContext(
        team_id=actors.team.pk,
        user_id=actors.owner.pk,
        connection_id=None,
        model_id=ENGINE_MODEL_ID,
        affinity_key="k",
    )
    with clock(at):
        usage_record_create(context=context, outcome=result)

    hour = UsageHourly.objects.get()
    day = UsageDaily.objects.get()
    assert hour.bucket == dt.datetime(2026, 11, 2, 13, tzinfo=dt.UTC)
    assert day.bucket == dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
    assert (hour.requests, hour.prompt_tokens, hour.cached_tokens, hour.completion_tokens) == (
        1,
        2000,
        1500,
        100,
    )
    assert (hour.affinity, hour.cache_state, hour.user_id, hour.connection_id) == (
        True,
        "hit",
        actors.owner.pk,
        0,
    )
    # Kimi K2.5's card that day (K2.6's): 500 fresh x $0.95/M + 1500 x $0.16/M + 100 x $4.00/M, in 1e-10 USD
    assert (hour.input_cost_e10, hour.cached_input_cost_e10, hour.output_cost_e10) == (
        4_750_000,
        2_400_000,
        4_000_000,
    )
    assert hour.total_cost_e10 == 11_150_000
    # Histogram columns are made from the edges (typed by name only): [400, 500) and [2000, 3000)
    assert getattr(hour, TTFT_COLUMNS[6]) == 1 and getattr(hour, LATENCY_COLUMNS[11]) == 1
    assert histogram_bucket(420) == 6 and histogram_bucket(2600) == 11 and histogram_bucket(10**9) == 19


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_of_one_bucket_lose_no_increment(actors: Any) -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite serializes writers itself; the race needs PostgreSQL's row locks")
    at = dt.datetime(2026, 11, 2, 13, 0, tzinfo=dt.UTC)
    result = Outcome(
        status=UsageStatus.OK,
        usage=NormalizedUsage(prompt_tokens=10, cached_tokens=0, completion_tokens=1),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=10,
        latency_ms=20,
    )
    context = RequestContext(
        team_id=actors.team.pk, user_id=None, connection_id=None, model_id=ENGINE_MODEL_ID
    )
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            barrier.wait()
            for _ in range(25):
                usage_record_create(context=context, outcome=result)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer) for _ in range(8)]
    with clock(at):  # one clock for all threads
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert not errors
    assert UsageHourly.objects.get().requests == 200
    assert UsageDaily.objects.get().prompt_tokens == 2000


@pytest.mark.django_db
def test_a_gateway_record_lands_under_its_key_and_end_user_and_a_chat_record_under_neither(
    actors: Any,
) -> None:
    key, _ = api_key_issue(team_id=actors.team.pk, name="shop", connection_id=None, created_by_id=None)
    result = Outcome(
        status=UsageStatus.OK,
        usage=NormalizedUsage(prompt_tokens=2000, cached_tokens=1500, completion_tokens=100),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=None,
        latency_ms=900,
    )
    base = {"team_id": actors.team.pk, "user_id": None, "connection_id": None, "model_id": ENGINE_MODEL_ID}
    with clock(dt.datetime(2026, 11, 2, 13, 47, tzinfo=dt.UTC)):
        usage_record_create(context=RequestContext(**base), outcome=result)
        for end_user in ("ana", "ana", ""):
            gateway = RequestContext(
                **base, path="gateway", attribution=Attribution(api_key_id=key.pk, end_user=end_user)
            )
            usage_record_create(context=gateway, outcome=result)

    hour = dt.datetime(2026, 11, 2, 13, tzinfo=dt.UTC)
    fields = ("bucket", "api_key_id", "path", "requests", "prompt_tokens", "cached_tokens", "total_cost_e10")
    # 3 x (500 fresh x $0.95/M + 1500 x $0.16/M + 100 x $4.00/M), in 1e-10 USD (as the test above)
    assert list(UsageKeyHourly.objects.values_list(*fields)) == [
        (hour, key.pk, "gateway", 3, 6000, 4500, 3 * 11_150_000)
    ]
    assert sorted(UsageEndUserHourly.objects.values_list("end_user", "requests", "total_cost_e10")) == [
        ("", 1, 11_150_000),
        ("ana", 2, 22_300_000),
    ]
    assert UsageKeyDaily.objects.get().bucket == hour.replace(hour=0)
    assert UsageDaily.objects.aggregate(n=Sum("requests"))["n"] == 4
