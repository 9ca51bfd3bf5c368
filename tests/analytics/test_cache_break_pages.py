"""Where a cache break shows: on the record's page and under the answer in its conversation,
each with the diff of the section that changed."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from decimal import Decimal
from typing import Any

from django.urls import reverse

from playground.accounts.models import StoreMode
from playground.analytics.filters import Filters, Period
from playground.analytics.selectors.cache_breaks import cache_breaks_over_time
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.chat.models import Conversation, MessageRole
from playground.usage.calls.context import RequestContext
from playground.usage.models import UsageRecord
from tests.support.actors import Actors
from tests.support.analytics import record_write
from tests.support.clients import client_for
from tests.support.clock import clock
from tests.support.messages import message_append

DAY = dt.datetime(2026, 11, 20, 9, tzinfo=dt.UTC)
TOOLS = [{"type": "function", "function": {"name": name}} for name in ("lookup_order", "refund")]


def _turns(actors: Actors, *, store: str = "") -> tuple[Conversation, UsageRecord, UsageRecord]:
    """Two turns of one conversation; the second reordered the tools and lost its prefix.
    `store`: the storage mode their records are kept in ("": the team's, full)."""
    conversation = Conversation.objects.create(
        team=actors.team, user=actors.owner, model_id=ENGINE_MODEL_ID, title="Refunds"
    )
    question = {"role": "user", "content": "Where is order 7?"}
    bodies: list[dict[str, Any]] = [
        {"model": ENGINE_MODEL_ID, "messages": [question], "tools": TOOLS},
        {
            "model": ENGINE_MODEL_ID,
            "messages": [
                question,
                {"role": "assistant", "content": "Shipped."},
                {"role": "user", "content": "Refund it."},
            ],
            "tools": TOOLS[::-1],
        },
    ]
    records = []
    for turn, (body, cached) in enumerate(zip(bodies, (0, 3), strict=True)):
        context = RequestContext(
            team_id=actors.team.pk,
            user_id=actors.owner.pk,
            connection_id=None,
            model_id=ENGINE_MODEL_ID,
            conversation_id=conversation.pk,
            affinity_key="conv-refunds",
            request_body=body,
            store=store,
        )
        record = record_write(
            DAY + dt.timedelta(minutes=turn),
            context,
            prompt=400 + 60 * turn,
            cached=cached,
            out=5,
            ttft=100,
            latency=300,
        )
        message_append(
            conversation=conversation, role=MessageRole.USER, content=body["messages"][-1]["content"]
        )
        message_append(
            conversation=conversation, role=MessageRole.ASSISTANT, content="Done.", usage_record=record
        )
        records.append(record)
    return conversation, records[0], records[1]


def test_the_record_page_says_where_the_cache_broke_and_shows_the_changed_tools(actors: Actors) -> None:
    _, first, second = _turns(actors)
    client = client_for(actors.owner)

    page = client.get(reverse("analytics:record-detail", args=[second.request_id])).content.decode()
    assert "Cache broke here:</strong> the tools list was reordered" in page
    assert "3 of 400 tokens an intact prefix would have brought back were cached" in page
    assert reverse("analytics:record-detail", args=[first.request_id]) in page
    # The diff moves "refund" from after "lookup_order" to before it.
    diff = page[page.index('class="diff-block"') : page.index("</pre>", page.index('class="diff-block"'))]
    refund = "&quot;name&quot;: &quot;refund&quot;</span>"
    assert diff.index(f'diff-added">+       {refund}') < diff.index(f'diff-removed">-       {refund}')

    unbroken = client.get(reverse("analytics:record-detail", args=[first.request_id])).content.decode()
    assert "Cache broke here" not in unbroken


def test_a_break_between_metadata_records_is_found_from_digests_and_says_the_text_was_not_kept(
    actors: Actors,
) -> None:
    _, first, second = _turns(actors, store=StoreMode.METADATA)

    page = client_for(actors.owner).get(reverse("analytics:record-detail", args=[second.request_id]))

    text = page.content.decode()
    assert first.request_body is None and second.request_body is None
    assert "Cache broke here:</strong> the tools list was reordered" in text
    assert "What changed cannot be shown: the text of this request or the one before was not kept" in text
    assert 'class="diff-block"' not in text


def test_the_conversation_shows_the_break_under_the_answer_that_lost_its_prefix(actors: Actors) -> None:
    conversation, first, second = _turns(actors)

    page = (
        client_for(actors.owner)
        .get(reverse("chat:conversation-detail", args=[conversation.pk]))
        .content.decode()
    )
    assert page.count("Cache broke here") == 1
    first_answer, second_answer = (page.index(f'id="message-{r.message.pk}"') for r in (first, second))
    assert first_answer < second_answer < page.index("Cache broke here")  # under the second answer
    assert "What changed" in page[second_answer:]


def test_another_teams_member_sees_no_record_and_no_break(actors: Actors) -> None:
    _, _, second = _turns(actors)
    response = client_for(actors.outsider).get(reverse("analytics:record-detail", args=[second.request_id]))
    assert response.status_code == 404


def test_the_dashboard_counts_breaks_by_cause_and_what_they_cost(actors: Actors) -> None:
    _, _, second = _turns(actors)
    # Bravo's own broken session never shows in Alpha's chart.
    for turn, cached in enumerate((0, 0)):
        context = RequestContext(
            team_id=actors.other_team.pk,
            user_id=actors.outsider.pk,
            connection_id=None,
            model_id=ENGINE_MODEL_ID,
            affinity_key="bravo",
            request_body={"messages": [{"role": "user", "content": "hi"}] * (turn + 1)},
        )
        record_write(
            DAY + dt.timedelta(minutes=turn),
            context,
            prompt=500 + turn,
            cached=cached,
            out=1,
            ttft=1,
            latency=1,
        )
    filters = Filters(
        team=actors.team,
        period=Period(
            start=DAY - dt.timedelta(hours=3), end=DAY + dt.timedelta(hours=3), preset="custom", hourly=True
        ),
    )

    rows = cache_breaks_over_time(filters)
    card = second.price_card
    assert card is not None
    lost = Decimal(397) * (card.input_per_m - card.effective_cached_input_per_m) / 1_000_000
    assert rows == [{"bucket": DAY, "cause": "tools_changed", "breaks": 1, "lost_tokens": 397, "lost": lost}]
    assert cache_breaks_over_time(replace(filters, model_id="another-model")) == []  # filters pick the breaks

    with clock(DAY + dt.timedelta(hours=2)):
        fragment = (
            client_for(actors.owner)
            .get(
                reverse("analytics:chart", args=["cache-breaks"]),
                {"range": "24h", "team": str(actors.team.pk)},
            )
            .content.decode()
        )
    # 397 tokens x ($0.95 - $0.16) per million at K2.6's card: $0.00031363
    assert "1 break lost $0.00031 of cache savings: tools changed $0.00031 (1)." in fragment
    assert "&quot;name&quot;: &quot;Tools changed&quot;" in fragment  # the trace, in the figure's JSON


def test_a_period_without_breaks_says_so(actors: Actors) -> None:
    with clock(DAY):
        fragment = (
            client_for(actors.owner)
            .get(reverse("analytics:chart", args=["cache-breaks"]), {"range": "24h"})
            .content.decode()
        )
    assert "No cache breaks in this period" in fragment
    assert "No requests in this period" not in fragment


def test_the_chart_reads_the_break_kept_when_it_was_written_not_the_records(
    actors: Actors, django_assert_max_num_queries: Any
) -> None:
    _, first, second = _turns(actors)
    UsageRecord.objects.filter(pk__in=[first.pk, second.pk]).update(prefix_digest=None)
    filters = Filters(
        team=actors.team,
        period=Period(start=DAY, end=DAY + dt.timedelta(hours=1), preset="custom", hourly=True),
    )
    with django_assert_max_num_queries(1):  # the hourly sums by cause (a rebuild reads bodies then)
        rows = cache_breaks_over_time(filters)
    assert [(row["cause"], row["breaks"]) for row in rows] == [("tools_changed", 1)]
