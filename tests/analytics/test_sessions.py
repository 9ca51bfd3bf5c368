"""The dashboard's session sections: cache hit ratio per session and per affinity key (what the
misses lost, their streaks) and the sessions closest to their context window, for the filters
and the team only."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from playground.analytics import views
from playground.analytics.selectors import hit_ratio
from playground.analytics.selectors.hit_ratio import Request, hit_ratios, judge_session
from playground.analytics.selectors.runway import sessions_near_limit
from playground.catalog.models import PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26
from playground.chat.models import Conversation
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.calls.context import Attribution, RequestContext
from playground.usage.metering import Outcome
from playground.usage.models import RequestPath, UsageRecord, UsageSource, UsageStatus
from playground.usage.money import money
from playground.usage.pricing import cost_for
from playground.usage.records import usage_record_create
from tests.support.actors import Actors
from tests.support.analytics import NOW, filters_for
from tests.support.clients import client_for
from tests.support.clock import clock

pytestmark = pytest.mark.django_db

START = NOW - dt.timedelta(hours=6)
# Kimi K2.6's card: $0.95 fresh, $0.16 cached per million input tokens.
MISS_PER_TOKEN = (Decimal("0.95") - Decimal("0.16")) / 1_000_000


def sent(
    team: Any, minute: int, prompt: int, cached: int | None, *, status: str = UsageStatus.OK, **context: Any
) -> UsageRecord:
    outcome = Outcome(
        status=status,
        usage=NormalizedUsage(prompt_tokens=prompt, completion_tokens=100, cached_tokens=cached),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=100,
        latency_ms=400,
        error_text="Internal error" if status != UsageStatus.OK else "",
    )
    request = RequestContext(
        team_id=team.pk,
        user_id=None,
        connection_id=None,
        model_id=context.pop("model_id", KIMI_K26),
        **context,
    )
    with clock(START + dt.timedelta(minutes=minute)):
        return usage_record_create(context=request, outcome=outcome)


def gateway(session: str, affinity_key: str = "") -> dict[str, Any]:
    return {
        "path": RequestPath.GATEWAY,
        "affinity_key": affinity_key,
        "attribution": Attribution(session=session),
    }


@pytest.fixture
def chat(actors: Actors) -> Conversation:
    """Alpha's conversation: six turns, three of them misses (two in a row), 9,500 tokens lost."""
    conversation = Conversation.objects.create(
        team=actors.team, user=actors.owner, model_id=KIMI_K26, title="Planning the launch"
    )
    for minute, (prompt, cached) in enumerate(
        [(1000, 0), (2000, 1000), (3000, 0), (4000, 500), (5000, 4000), (6000, 0)]
    ):
        sent(actors.team, minute, prompt, cached, conversation_id=conversation.pk, affinity_key="conv-x")
    return conversation


@pytest.fixture
def others(actors: Actors) -> None:
    """A gateway session that lost nothing, and Bravo's, which lost a lot."""
    sent(actors.team, 10, 1000, 0, **gateway("s-1", "shared"))
    sent(actors.team, 11, 1500, 1000, **gateway("s-1", "shared"))
    sent(actors.team, 12, 1800, None, status=UsageStatus.UPSTREAM_ERROR, **gateway("s-1", "shared"))
    sent(actors.team, 13, 2000, None, **gateway("s-1", "shared"))  # unknown: loses nothing
    sent(actors.other_team, 10, 90_000, 0, **gateway("bravo-s", "bravo-key"))
    sent(actors.other_team, 11, 100_000, 0, **gateway("bravo-s", "bravo-key"))


def test_each_session_has_its_hit_ratio_lost_tokens_money_and_longest_miss_streak(
    actors: Actors, chat: Conversation, others: None
) -> None:
    ratios = hit_ratios(filters_for(actors.teammate))

    conversation, quiet = ratios.sessions
    assert conversation.key == f"conversation:{chat.pk}"
    assert conversation.requests == 6
    assert conversation.lost_tokens == 2000 + 2500 + 5000
    assert conversation.lost == 9500 * MISS_PER_TOKEN
    assert conversation.longest_streak == 2
    assert conversation.hit_percent == "26%"  # 5,500 of 21,000
    assert (quiet.key, quiet.requests, quiet.lost_tokens, quiet.longest_streak) == ("session:s-1", 3, 0, 0)
    assert quiet.hit_percent == "40%"  # 1,000 of 2,500: the unknown one is in no ratio
    assert [row.key for row in ratios.affinity_keys] == ["conv-x", "shared"]
    assert ratios.affinity_keys[0].lost == conversation.lost
    assert not ratios.sessions_capped and not ratios.rows_capped


def test_another_teams_sessions_never_appear(actors: Actors, chat: Conversation, others: None) -> None:
    mine = hit_ratios(filters_for(actors.teammate))
    theirs = hit_ratios(filters_for(actors.outsider))

    assert "session:bravo-s" not in {row.key for row in mine.sessions}
    assert "bravo-key" not in {row.key for row in mine.affinity_keys}
    assert [row.key for row in theirs.sessions] == ["session:bravo-s"]
    assert theirs.sessions[0].lost_tokens == 90_000


def test_the_filters_pick_the_requests(actors: Actors, chat: Conversation, others: None) -> None:
    ratios = hit_ratios(filters_for(actors.teammate, path=RequestPath.GATEWAY))

    assert [row.key for row in ratios.sessions] == ["session:s-1"]


def test_the_hit_ratio_section_draws_the_sessions_by_lost_savings_with_their_tables(
    actors: Actors, chat: Conversation, others: None
) -> None:
    with clock(NOW):
        page = client_for(actors.teammate).get(reverse("analytics:dashboard"), {"range": "24h"})
        fragment = client_for(actors.teammate).get(reverse("analytics:hit-ratio"), {"range": "24h"})

    html = fragment.content.decode()
    assert reverse("analytics:hit-ratio").encode() in page.content
    assert fragment.status_code == 200
    assert 'data-figure="' in html and "Lost savings" in html
    assert f'href="/chat/{chat.pk}/"' in html and "Planning the launch" in html
    assert money(9500 * MISS_PER_TOKEN) in html
    assert "9,500" in html
    assert "<code>shared</code>" in html and "<code>conv-x</code>" in html
    assert "bravo" not in html


def test_the_sections_refuse_another_teams_id(actors: Actors) -> None:
    for name in ("analytics:hit-ratio", "analytics:runway"):
        response = client_for(actors.outsider).get(
            reverse(name), {"team": str(actors.team.pk), "range": "24h"}
        )
        assert response.status_code == 404


def test_sessions_closest_to_their_window_come_first(
    actors: Actors, chat: Conversation, others: None
) -> None:
    for minute, prompt in enumerate([5000, 6000, 7000]):  # the engine reads 8,192 tokens
        sent(actors.team, 20 + minute, prompt, prompt - 1000, model_id=ENGINE_MODEL_ID, **gateway("near"))

    near = sessions_near_limit(filters_for(actors.teammate))

    assert [each.session for each in near] == ["session:near", f"conversation:{chat.pk}", "session:s-1"]
    first = near[0].runway
    assert (first.model_id, first.growth, first.turns_left, first.few_left) == (
        ENGINE_MODEL_ID,
        1000,
        1,
        True,
    )
    assert near[1].runway.turns_left == (262_144 - 100 - 6000) // 1000
    assert near[1].turns_in_period == 6
    card = PriceCard.objects.get(pk=UsageRecord.objects.filter(session="near").values("price_card_id")[:1])
    share = Decimal(4000 + 5000 + 6000) / Decimal(5000 + 6000 + 7000)
    next_one = NormalizedUsage(prompt_tokens=8000, completion_tokens=100, cached_tokens=int(8000 * share))
    assert first.next_turns == 1
    assert first.next_turns_cost == cost_for(usage=next_one, card=card).total
    assert sessions_near_limit(filters_for(actors.outsider))[0].session == "session:bravo-s"

    with clock(NOW):
        html = client_for(actors.teammate).get(reverse("analytics:runway"), {"range": "24h"}).content.decode()
    assert html.index("near") < html.index("Planning the launch")
    assert 'class="is-few"' in html and f'href="/chat/{chat.pk}/"' in html
    assert "8k" in html and "256k" in html


def test_the_reads_are_capped_and_the_section_says_so(
    actors: Actors, chat: Conversation, others: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hit_ratio, "SESSIONS_READ", 1)
    monkeypatch.setattr(hit_ratio, "ROWS_READ", 4)
    monkeypatch.setattr(views, "SESSIONS_READ", 1)

    ratios = hit_ratio.hit_ratios(filters_for(actors.teammate))
    with clock(NOW):
        html = (
            client_for(actors.teammate).get(reverse("analytics:hit-ratio"), {"range": "24h"}).content.decode()
        )

    assert ratios.sessions_capped and ratios.rows_capped
    (only,) = ratios.sessions  # the one with the most prompt tokens, its first four requests
    assert (only.key, only.requests, only.lost_tokens) == (f"conversation:{chat.pk}", 4, 4500)
    assert "Read from the 1 sessions with the most prompt tokens (the period has more)" in html


def test_a_shortfall_within_a_caches_granularity_is_no_miss_and_loses_nothing() -> None:
    """The hit ratio's misses are the cache-break detector's: 20 tokens short of 1,000 is a
    cache handing back whole blocks; 400 short is a miss, and only that one loses money."""
    requests = [
        Request(session="s", affinity_key="k", prompt_tokens=prompt, cached_tokens=cached, card_id=None)
        for prompt, cached in ((1000, 0), (1100, 980), (1200, 700))
    ]
    judged = judge_session(requests, {})
    assert [(j.expected, j.lost_tokens, j.missed) for j in judged] == [
        (None, 0, False),
        (1000, 0, False),
        (1100, 400, True),
    ]


def test_a_session_named_by_its_affinity_key_alone_is_read_without_its_keys_other_sessions(
    actors: Actors, chat: Conversation, others: None
) -> None:
    """The reads find each session's records by their columns (`sessions_filter`): a gateway
    session that sends the same affinity key is another session."""
    sent(actors.team, 30, 1000, 0, **gateway("", "aff-only"))
    sent(actors.team, 31, 3000, 1000, **gateway("", "aff-only"))
    sent(actors.team, 32, 50_000, 0, **gateway("s-2", "aff-only"))

    near = {each.session: each for each in sessions_near_limit(filters_for(actors.teammate))}
    alone = near["affinity:aff-only"]
    assert (alone.turns_in_period, alone.runway.last_prompt_tokens) == (2, 3000)
    rows = {row.key: row for row in hit_ratios(filters_for(actors.teammate)).sessions}
    assert (rows["affinity:aff-only"].requests, rows["affinity:aff-only"].lost_tokens) == (2, 0)
    assert rows["session:s-2"].requests == 1
