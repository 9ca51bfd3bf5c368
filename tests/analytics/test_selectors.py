"""Dashboard selectors over the rollups: known rows in, exact figures out."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from django.db.models import Count, Sum
from django.http import QueryDict

from playground.analytics.filters import Period, filters_from_query
from playground.analytics.selectors.chart_series import (
    cache_ratio_by_affinity,
    cost_by_group,
    latency_distribution,
    requests_by_status,
    savings_over_time,
    tokens_over_time,
    ttft_percentiles_by_cache,
)
from playground.analytics.selectors.conversations import prompt_growth, top_conversations
from playground.analytics.selectors.request_log import log_records
from playground.analytics.selectors.rollups import buckets, chart_period, usd
from playground.analytics.selectors.totals import log_totals
from playground.analytics.selectors.what_if import NO_CACHE_DISCOUNT, what_if, what_if_target
from playground.catalog.models import PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26
from playground.chat.models import Conversation
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.calls.context import RequestContext
from playground.usage.metering import Outcome
from playground.usage.models import UsageConversationDaily, UsageConversationTotal, UsageSource, UsageStatus
from playground.usage.records import usage_record_create
from tests.support.analytics import NOW, Known, filters_for, record_write
from tests.support.clock import clock

pytestmark = pytest.mark.django_db
H9 = dt.datetime(2026, 11, 20, 9, tzinfo=dt.UTC)
H10 = dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC)


def test_a_day_reads_hourly_buckets_and_a_month_daily_ones(actors: Any) -> None:
    assert filters_for(actors.owner).period.hourly
    assert len(buckets(filters_for(actors.owner))) == 24  # 12:00 yesterday to 11:00 today
    month = filters_for(actors.owner, range="30d")
    assert not month.period.hourly and len(buckets(month)) == 31


def test_cost_is_summed_per_bucket_and_model_and_leaves_other_teams_out(actors: Any, known: Known) -> None:
    rows = cost_by_group(filters_for(actors.owner))

    assert [(r["bucket"], r["label"], r["cost"]) for r in rows] == [
        (H9, ENGINE_MODEL_ID, Decimal("0.00195")),
        (H10, KIMI_K26, Decimal("0.0135")),
    ]


def test_cost_can_be_stacked_by_user(actors: Any, known: Known) -> None:
    rows = cost_by_group(filters_for(actors.owner, group="user"))

    assert {(r["bucket"], r["label"], r["cost"]) for r in rows} == {
        (H9, "owner", Decimal("0.00075")),
        (H9, "teammate", Decimal("0.0012")),
        (H10, "owner", Decimal("0.0135")),
    }


def test_fresh_and_cached_tokens_with_the_share_of_known_prompts(actors: Any, known: Known) -> None:
    rows = tokens_over_time(filters_for(actors.owner))

    assert rows == [
        {"bucket": H9, "fresh": 1500, "cached": 1500, "share": 0.5},
        {"bucket": H10, "fresh": 10000, "cached": 0, "share": None},  # not reported is not zero
    ]


def test_cache_hit_ratio_is_split_by_affinity_and_skips_unreported(actors: Any, known: Known) -> None:
    rows = cache_ratio_by_affinity(filters_for(actors.owner))

    assert [(r["bucket"], r["affinity"], r["ratio"]) for r in rows] == [(H9, False, 0.0), (H9, True, 0.75)]


def test_savings_are_the_cached_tokens_at_the_input_price_minus_what_they_cost(
    actors: Any, known: Known
) -> None:
    rows = savings_over_time(filters_for(actors.owner))

    nine = next(r for r in rows if r["bucket"] == H9)
    assert nine["would_cost"] == Decimal("0.0009")  # 1,500 x $0.60/M
    assert nine["cost"] == Decimal("0.00015")  # 1,500 x $0.10/M
    assert nine["savings"] == Decimal("0.00075")


def test_ttft_percentiles_split_hits_from_misses(actors: Any, known: Known) -> None:
    rows = ttft_percentiles_by_cache(filters_for(actors.owner))

    assert [(r["cache_state"], r["p50"], r["p95"]) for r in rows] == [
        ("hit", 450.0, 495.0),  # 420 ms in [400, 500)
        ("miss", 875.0, 987.5),  # 900 ms in [750, 1000)
    ]


def test_latency_distribution_combines_buckets_into_percentiles(actors: Any, known: Known) -> None:
    result = latency_distribution(filters_for(actors.owner))

    assert sum(result["counts"]) == 3
    assert result["counts"][9] == result["counts"][11] == result["counts"][14] == 1
    assert result["p50"] == 2500.0  # the middle request is in [2000, 3000)


def test_requests_by_status(actors: Any, known: Known) -> None:
    rows = requests_by_status(filters_for(actors.owner))

    assert rows == [
        {"bucket": H9, "status": "ok", "requests": 2},
        {"bucket": H10, "status": "upstream_error", "requests": 1},
    ]


def test_filters_narrow_every_chart(actors: Any, known: Known) -> None:
    assert requests_by_status(filters_for(actors.owner, status="ok")) == [
        {"bucket": H9, "status": "ok", "requests": 2}
    ]
    assert [r["cost"] for r in cost_by_group(filters_for(actors.owner, affinity="on"))] == [
        Decimal("0.00075")
    ]
    assert cost_by_group(filters_for(actors.owner, user=str(actors.teammate.pk)))[0]["cost"] == Decimal(
        "0.0012"
    )
    assert cost_by_group(filters_for(actors.owner, model=KIMI_K26))[0]["cost"] == Decimal("0.0135")
    assert cost_by_group(filters_for(actors.owner, path="batch")) == []


def test_top_conversations_and_their_prompt_growth(actors: Any, known: Known) -> None:
    filters = filters_for(actors.owner)

    top = top_conversations(filters)
    growth = prompt_growth(filters)

    assert top == [
        {
            "conversation_id": known.conversation.pk,
            "title": "Alpha's long chat",
            "cost": Decimal("0.00195"),
            "requests": 2,
            "prompt_tokens": 3000,
            "cached_tokens": 1500,
        }
    ]
    assert growth == [
        {"conversation_id": known.conversation.pk, "title": "Alpha's long chat", "turns": [2000, 1000]}
    ]


def test_top_conversations_name_a_deleted_one_and_never_another_teams(actors: Any, known: Known) -> None:
    bravos = known.other_conversation
    context = RequestContext(
        team_id=actors.team.pk,
        user_id=actors.owner.pk,
        connection_id=None,
        model_id=ENGINE_MODEL_ID,
        conversation_id=bravos.pk,  # an Alpha record naming Bravo's conversation: its title stays Bravo's
    )
    record_write(H10, context, prompt=10, cached=0, out=5, ttft=1, latency=2)
    alphas = known.conversation.pk
    known.conversation.delete()

    with clock(NOW):
        top = top_conversations(filters_for(actors.owner))

    assert {row["conversation_id"]: row["title"] for row in top} == {
        alphas: f"Conversation #{alphas} (deleted)",
        bravos.pk: f"Conversation #{bravos.pk} (deleted)",
    }


def test_what_if_reprices_the_periods_tokens_under_another_card(actors: Any, known: Known) -> None:
    k26 = PriceCard.objects.get(model__model_id=KIMI_K26)
    target = what_if_target(str(k26.pk))
    assert target is not None

    rows = {r["model_id"]: r for r in what_if(filters_for(actors.owner), target=target)}

    engine = rows[ENGINE_MODEL_ID]
    assert (engine["prompt_tokens"], engine["cached_tokens"], engine["completion_tokens"]) == (
        3000,
        1500,
        300,
    )
    assert engine["actual"] == Decimal("0.00195")
    # 1,500 fresh x $0.95 + 1,500 cached x $0.16 + 300 x $4.00, per M
    assert engine["repriced"] == Decimal("0.002865")
    assert engine["difference"] == Decimal("0.000915")


def test_what_if_without_the_cache_discount(actors: Any, known: Known) -> None:
    target = what_if_target(NO_CACHE_DISCOUNT)
    assert target is not None

    rows = {r["model_id"]: r for r in what_if(filters_for(actors.owner), target=target)}

    assert rows[ENGINE_MODEL_ID]["repriced"] == Decimal("0.0027")  # 3,000 x $0.60 + 300 x $3.00, per M
    assert rows[ENGINE_MODEL_ID]["difference"] == Decimal("0.00075")  # = the savings
    assert rows[KIMI_K26]["difference"] == Decimal(0)  # it reported no cache hit


def test_top_conversations_from_totals_equal_ranking_every_conversation_day(actors: Any) -> None:
    """The totals shortcut ranks exactly as summing the period's days, straddlers and ties included."""
    rng = random.Random(11)
    conversations = [
        Conversation.objects.create(team=actors.team, user=actors.owner, model_id=ENGINE_MODEL_ID)
        for _ in range(40)
    ]
    start = dt.datetime(2026, 10, 1, 12, 0, tzinfo=dt.UTC)
    for _ in range(260):
        conversation = rng.choice(conversations)
        at = start + dt.timedelta(days=rng.randint(0, 40), minutes=rng.randint(0, 600))
        context = RequestContext(
            team_id=actors.team.pk,
            user_id=actors.owner.pk,
            connection_id=None,
            model_id=ENGINE_MODEL_ID,
            conversation_id=conversation.pk,
        )
        prompt = rng.choice([0, 1000, 1000, 2000, rng.randint(1, 90_000)])  # repeats make ties
        with clock(at):
            usage_record_create(
                context=context,
                outcome=Outcome(
                    status=UsageStatus.OK,
                    usage=NormalizedUsage(prompt_tokens=prompt, completion_tokens=0, cached_tokens=0),
                    usage_source=UsageSource.PROVIDER,
                    ttft_ms=None,
                    latency_ms=900,
                ),
            )
    straddled = 0
    for first, last in [(0, 40), (3, 9), (10, 12), (20, 20), (0, 2), (35, 44), (15, 30)]:
        day = start.date()
        filters = filters_for(
            actors.owner,
            range="custom",
            start=str(day + dt.timedelta(days=first)),
            end=str(day + dt.timedelta(days=last)),
        )
        for limit in (1, 3, 10):
            naive = list(
                UsageConversationDaily.objects.filter(
                    team=actors.team, bucket__gte=filters.period.start, bucket__lt=filters.period.end
                )
                .values("conversation_id")
                .annotate(
                    cost=Sum("total_cost_e10"), requests=Sum("requests"), prompt_tokens=Sum("prompt_tokens")
                )
                .order_by("-cost", "conversation_id")[:limit]
            )
            got = top_conversations(filters, limit=limit)
            assert [(r["conversation_id"], r["cost"], r["requests"], r["prompt_tokens"]) for r in got] == [
                (r["conversation_id"], usd(r["cost"]), r["requests"], r["prompt_tokens"]) for r in naive
            ], (first, last, limit)
        straddled += UsageConversationTotal.objects.filter(
            team=actors.team, first_bucket__lt=filters.period.start, last_bucket__gte=filters.period.start
        ).count()
    assert straddled > 20  # the ranges really cut through conversations


# --- the span the time charts draw ---------------------------------------------------------------


def test_a_preset_starts_at_the_start_of_its_first_bucket(actors: Any) -> None:
    now = NOW + dt.timedelta(minutes=34, seconds=5)

    def start(preset: str) -> dt.datetime:
        result = filters_from_query(user=actors.owner, query=QueryDict(f"range={preset}"), now=now)
        assert result is not None
        return result.period.start

    assert start("24h") == dt.datetime(2026, 11, 19, 12, tzinfo=dt.UTC)
    assert start("7d") == dt.datetime(2026, 11, 13, 12, tzinfo=dt.UTC)
    assert start("30d") == dt.datetime(2026, 10, 21, tzinfo=dt.UTC)


def test_a_burst_in_a_week_is_drawn_over_its_own_hours(actors: Any, known: Known) -> None:
    week = filters_for(actors.owner, range="7d")

    drawn = chart_period(week)

    # Requests at 09:00 and 10:00, widened to twelve hours and kept inside the period (ends 12:00).
    assert drawn == Period(start=H9 - dt.timedelta(hours=9), end=NOW, preset="7d", hourly=True)
    zoomed = replace(week, period=drawn)
    assert len(buckets(zoomed)) == 12
    assert [r["cost"] for r in cost_by_group(zoomed)] == [r["cost"] for r in cost_by_group(week)]


def test_two_days_of_a_quarter_are_drawn_hourly(actors: Any, known: Known) -> None:
    record_write(
        H9 - dt.timedelta(days=1),
        RequestContext(team_id=actors.team.pk, user_id=None, connection_id=None, model_id=KIMI_K26),
        prompt=10,
        cached=0,
        out=1,
        ttft=100,
        latency=200,
    )

    drawn = chart_period(filters_for(actors.owner, range="90d"))

    assert drawn == Period(
        start=H9 - dt.timedelta(days=1), end=H10 + dt.timedelta(hours=1), preset="90d", hourly=True
    )


def test_a_period_whose_requests_fill_half_of_it_is_drawn_whole(actors: Any, known: Known) -> None:
    day = filters_for(actors.owner, range="24h")  # the burst widened to 12 hours is half the day
    assert chart_period(day) == day.period
    empty = filters_for(actors.owner, range="7d", model="@cf/none")
    assert chart_period(empty) == empty.period


# --- totals from the rollups equal the records' ---------------------------------------------------


def test_the_log_totals_from_rollups_equal_summing_the_records(actors: Any) -> None:
    """Presets start on a bucket boundary, so the rollups' whole buckets hold exactly the log's rows."""
    rng = random.Random(5)
    now = dt.datetime(2026, 11, 20, 12, 34, 56, tzinfo=dt.UTC)
    users = [actors.owner, actors.teammate]
    for _ in range(300):
        at = now - dt.timedelta(minutes=rng.randint(1, 95 * 24 * 60))
        context = RequestContext(
            team_id=actors.team.pk,
            user_id=rng.choice(users).pk,
            connection_id=None,
            model_id=rng.choice([ENGINE_MODEL_ID, KIMI_K26]),
            affinity_key=rng.choice(["", "session"]),
        )
        prompt = rng.randint(1, 5000)
        cached = rng.choice([None, 0, rng.randint(0, prompt)])
        status = rng.choice([UsageStatus.OK, UsageStatus.OK, UsageStatus.UPSTREAM_ERROR, UsageStatus.TIMEOUT])
        record_write(
            at,
            context,
            prompt=prompt,
            cached=cached,
            out=rng.randint(0, 900),
            ttft=1,
            latency=2,
            status=status,
        )
    cases = [{}, {"status": "ok"}, {"affinity": "on"}, {"user": str(actors.teammate.pk)}, {"model": KIMI_K26},
             {"cached_share": "none"}, {"cached_share": "unknown"}]  # fmt: skip
    for preset in ("24h", "7d", "30d", "90d"):
        for params in cases:
            query = QueryDict(mutable=True)
            query.update({"range": preset, **params})
            filters = filters_from_query(user=actors.owner, query=query, now=now)
            assert filters is not None
            records = log_records(filters)
            raw = records.aggregate(
                n=Count("id"),
                prompt=Sum("prompt_tokens"),
                out=Sum("completion_tokens"),
                cached=Sum("cached_tokens"),
            )

            totals = log_totals(filters)

            assert (
                totals.requests,
                totals.prompt_tokens,
                totals.completion_tokens,
                totals.cached_tokens,
            ) == (raw["n"], raw["prompt"] or 0, raw["out"] or 0, raw["cached"] or 0), (preset, params)
            assert totals.cost == sum((r.total_cost for r in records), Decimal(0)), (preset, params)
            assert raw["n"] > 0, (preset, params)
