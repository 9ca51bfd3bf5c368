"""The rollups by session: kept on write as the rebuild computes them, and the dashboard's runway and
hit-ratio fragments ranking sessions from them exactly as from the records (issue 40)."""

from __future__ import annotations

import datetime as dt
import itertools
import random
from typing import Any

import pytest
from django.db.models import Count, Max, Sum

from playground.analytics.filters import Filters, Period
from playground.analytics.selectors import hit_ratio, runway, session_rankings
from playground.analytics.selectors.session_rankings import plain, top_sessions
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26
from playground.chat.models import Conversation
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.calls.context import Attribution, RequestContext
from playground.usage.insights.sessions import session_key_expression
from playground.usage.metering import Outcome
from playground.usage.models import (
    RequestPath,
    TeamRetention,
    UsageRecord,
    UsageSessionHourly,
    UsageSessionTotal,
    UsageSource,
    UsageStatus,
)
from playground.usage.records import usage_record_create, usage_records_create_many
from playground.usage.session_rollups import COUNTED, SESSION_ROLLUPS, session_rollups_rebuild
from tests.support.actors import Actors
from tests.support.clock import clock

pytestmark = pytest.mark.django_db

START = dt.datetime(2026, 11, 1, 0, 0, tzinfo=dt.UTC)
DAYS = 6


def snapshot() -> dict[str, list[tuple[Any, ...]]]:
    tables = {}
    for model in SESSION_ROLLUPS:
        names = [f.attname for f in model._meta.concrete_fields if f.attname != "id"]
        tables[model.__name__] = sorted(model.objects.values_list(*names))
    return tables


def _outcome(rng: random.Random, prompt: int) -> Outcome:
    status = rng.choice([UsageStatus.OK] * 8 + [UsageStatus.UPSTREAM_ERROR, UsageStatus.CLIENT_DISCONNECTED])
    return Outcome(
        status=status,
        usage=NormalizedUsage(
            prompt_tokens=prompt if rng.random() > 0.05 else 0,
            completion_tokens=rng.randint(0, 900),
            cached_tokens=rng.choice([None, 0, prompt // 2]),
        ),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=100,
        latency_ms=400,
    )


def seed_sessions(actors: Actors, *, seed: int, sessions: int = 90) -> None:
    """`sessions` sessions of both teams over `DAYS` days (conversations, gateway sessions,
    affinity keys, and requests in none), a few turns each, some coming back days later;
    written in groups and one by one, as the writers do."""
    rng = random.Random(seed)
    conversations = [
        Conversation.objects.create(team=actors.team, user=actors.owner, model_id=KIMI_K26) for _ in range(12)
    ]
    for n in range(sessions):
        team = actors.team if n % 5 else actors.other_team
        kind = n % 4
        context: dict[str, Any] = {"affinity_key": f"k-{n % 17}" if rng.random() < 0.7 else ""}
        if kind == 0 and team == actors.team:
            context |= {"conversation_id": rng.choice(conversations).pk, "path": RequestPath.CHAT}
        elif kind == 1:
            context |= {"path": RequestPath.GATEWAY, "attribution": Attribution(session=f"s-{n}")}
        elif kind == 2:
            context |= {"path": RequestPath.GATEWAY}  # the affinity key names it, or nothing does
        else:
            context |= {"path": RequestPath.BATCH}
        at = START + dt.timedelta(minutes=rng.randint(0, DAYS * 24 * 60 - 200))
        base, growth = rng.randint(100, 3000), rng.randint(50, 900)
        group: list[tuple[RequestContext, Outcome]] = []
        for turn in range(rng.randint(1, 9)):
            request = RequestContext(
                team_id=team.pk,
                user_id=None,
                connection_id=None,
                model_id=rng.choice([KIMI_K26, ENGINE_MODEL_ID]),
                **context,
            )
            sent = _outcome(rng, base + growth * turn)
            at += dt.timedelta(minutes=rng.randint(1, 50) if rng.random() > 0.1 else rng.randint(600, 3000))
            if rng.random() < 0.5:
                with clock(at):
                    usage_record_create(context=request, outcome=sent)
            else:
                group.append((request, sent))
                if len(group) == 3:
                    with clock(at):
                        usage_records_create_many(group)
                    group = []
        if group:
            with clock(at):
                usage_records_create_many(group)


def test_session_rollups_kept_on_write_equal_the_rebuild_and_count_the_answered_records(
    actors: Actors,
) -> None:
    seed_sessions(actors, seed=3)
    kept = snapshot()
    counted = UsageRecord.objects.filter(COUNTED)
    assert 100 < counted.count() < UsageRecord.objects.count()  # errors, empty prompts and no session
    assert UsageSessionTotal.objects.aggregate(n=Sum("requests"))["n"] == counted.count()
    assert (
        UsageSessionHourly.objects.aggregate(n=Sum("prompt_tokens"))["n"]
        == counted.aggregate(n=Sum("prompt_tokens"))["n"]
    )
    assert {"conversation", "session", "affinity"} == {
        key.split(":")[0] for key in UsageSessionTotal.objects.values_list("session_key", flat=True)
    }
    longest = max(UsageSessionTotal.objects.all(), key=lambda row: row.last_at - row.first_at)
    assert longest.last_at - longest.first_at > dt.timedelta(hours=10)  # spans hours, even days

    session_rollups_rebuild()

    assert snapshot() == kept


def test_a_rebuild_keeps_the_hours_before_the_retention_horizon(actors: Actors) -> None:
    seed_sessions(actors, seed=5, sessions=40)
    horizon = START + dt.timedelta(days=3)
    before = sorted(
        UsageSessionHourly.objects.filter(team=actors.team, bucket__lt=horizon).values_list(
            "session_key", "bucket", "requests"
        )
    )
    totals = snapshot()["UsageSessionTotal"]
    UsageRecord.objects.filter(team=actors.team, created_at__lt=horizon).delete()
    TeamRetention.objects.update_or_create(pk=actors.team.pk, defaults={"records_removed_before": horizon})

    session_rollups_rebuild()

    assert (
        before
        and sorted(
            UsageSessionHourly.objects.filter(team=actors.team, bucket__lt=horizon).values_list(
                "session_key", "bucket", "requests"
            )
        )
        == before
    )
    assert snapshot()["UsageSessionTotal"] == totals


def _grouped(filters: Filters, by: str, limit: int) -> list[tuple[str, int, int]]:
    """What the fragments ranked before the rollups: every counted record of the period grouped."""
    aggregate = Sum("prompt_tokens") if by == "prompt_tokens" else Max("prompt_tokens")
    rows = (
        UsageRecord.objects.filter(
            COUNTED,
            team=filters.team,
            created_at__gte=filters.period.start,
            created_at__lt=filters.period.end,
        )
        .annotate(session_key=session_key_expression())
        .order_by()
        .values("session_key")
        .annotate(value=aggregate, requests=Count("id"))
        .values_list("session_key", "value", "requests")
    )
    return sorted(rows, key=lambda row: (-row[1], row[0]))[:limit]


PERIODS = [  # whole hours, partial first and last hours, inside one hour, the whole span
    (START + dt.timedelta(hours=5), START + dt.timedelta(days=2)),
    (START + dt.timedelta(hours=30, minutes=17), START + dt.timedelta(days=4, minutes=41)),
    (START + dt.timedelta(hours=40, minutes=5), START + dt.timedelta(hours=40, minutes=55)),
    (START - dt.timedelta(days=1), START + dt.timedelta(days=DAYS + 2)),
]


def test_the_top_sessions_from_the_rollups_are_the_records_grouped(
    actors: Actors, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_sessions(actors, seed=9)
    monkeypatch.setattr(session_rankings, "BATCH", 4)  # many batches: the walk's stop is exercised
    measures: tuple[session_rankings.Measure, ...] = ("prompt_tokens", "peak_prompt_tokens")
    for by, limit, (start, end) in itertools.product(measures, (1, 7, 200), PERIODS):
        filters = Filters(team=actors.team, period=Period(start=start, end=end, preset="custom", hourly=True))
        ranked = top_sessions(filters, by=by, limit=limit)
        expected = _grouped(filters, by, limit)
        assert [(s.session, getattr(s, by), s.requests) for s in ranked] == expected, (by, limit, start)
    assert len(expected) > 20  # the whole span, every session


def test_the_runway_and_hit_ratio_fragments_read_the_same_from_the_rollups_and_the_records(
    actors: Actors, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_sessions(actors, seed=13)
    monkeypatch.setattr(hit_ratio, "SESSIONS_READ", 9)
    monkeypatch.setattr(runway, "CANDIDATES", 8)
    for start, end in PERIODS:
        filters = Filters(team=actors.team, period=Period(start=start, end=end, preset="custom", hourly=True))
        assert plain(filters)
        from_rollups = (hit_ratio.hit_ratios(filters), runway.sessions_near_limit(filters))
        for module in (hit_ratio, runway):
            monkeypatch.setattr(module, "plain", lambda _: False)
        from_records = (hit_ratio.hit_ratios(filters), runway.sessions_near_limit(filters))
        for module in (hit_ratio, runway):
            monkeypatch.setattr(module, "plain", plain)
        assert from_rollups == from_records
    assert from_rollups[0].sessions and from_rollups[0].sessions_capped


def test_a_filter_beyond_the_period_ranks_the_filtered_records() -> None:
    period = Period(start=START, end=START + dt.timedelta(days=1), preset="custom", hourly=True)
    team: Any = object()
    assert plain(Filters(team=team, period=period, group="user", sort="cost"))
    assert not plain(Filters(team=team, period=period, model_id=KIMI_K26))
    assert not plain(Filters(team=team, period=period, tag="prod"))


def test_the_ranking_starts_at_the_retention_horizon(actors: Actors) -> None:
    """The rollups keep hours whose records retention deleted; the fragments read records next, so
    a session of those hours only is not ranked."""
    conversation = Conversation.objects.create(team=actors.team, user=actors.owner, model_id=KIMI_K26)
    for day, prompt, chat in ((0, 90_000, True), (2, 1_000, False)):
        context = {"conversation_id": conversation.pk} if chat else {"affinity_key": "later"}
        with clock(START + dt.timedelta(days=day, hours=3)):
            usage_record_create(
                context=RequestContext(
                    team_id=actors.team.pk, user_id=None, connection_id=None, model_id=KIMI_K26, **context
                ),
                outcome=Outcome(
                    status=UsageStatus.OK,
                    usage=NormalizedUsage(prompt_tokens=prompt, completion_tokens=10, cached_tokens=0),
                    usage_source=UsageSource.PROVIDER,
                    ttft_ms=100,
                    latency_ms=300,
                ),
            )
    filters = Filters(
        team=actors.team,
        period=Period(start=START, end=START + dt.timedelta(days=3), preset="custom", hourly=False),
    )
    first, *_ = top_sessions(filters, by="prompt_tokens", limit=5)
    assert first.session.startswith("conversation:")
    UsageRecord.objects.filter(conversation_id=conversation.pk).delete()
    TeamRetention.objects.update_or_create(
        pk=actors.team.pk, defaults={"records_removed_before": START + dt.timedelta(days=1)}
    )

    assert [s.session for s in top_sessions(filters, by="prompt_tokens", limit=5)] == ["affinity:later"]
