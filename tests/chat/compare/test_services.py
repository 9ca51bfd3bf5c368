"""Compare: each column an ordinary metered request (path `compare`), over the compare socket,
against the loopback fake Workers AI upstream. The multi-turn runs are in `test_turns`."""

from __future__ import annotations

import html
from decimal import Decimal

import pytest

from playground.catalog.seed import KIMI_K26
from playground.chat.compare.models import Comparison, ComparisonAnswer, ComparisonColumn
from playground.chat.compare.runs import comparison_run_start
from playground.chat.compare.services import Target, comparison_create
from playground.chat.models import Conversation
from playground.providers.models import ProviderConnection
from playground.usage.budgets import BUDGET_EXCEEDED
from playground.usage.metering import STOPPED_BY_USER
from playground.usage.models import RequestPath, TeamBudget, UsageRecord, UsageStatus
from playground.usage.sources import record_source_links
from tests.chat.compare.conftest import RUN_END, OpenCompare
from tests.fakes.upstream import FakeUpstream, sse
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.sockets import SLOW_WORDS, Socket

pytestmark = pytest.mark.django_db(transaction=True)

COLUMN_END = 'data-state="done"'  # a column's stored answer (not the streaming one)


def two_settings(
    actors: Actors, connection: ProviderConnection, *, max_tokens: tuple[int, int] = (64, 64)
) -> Comparison:
    """Kimi twice, at two temperatures (and two max_tokens)."""
    return comparison_create(
        user=actors.owner,
        prompt="Name a colour.",
        system_prompt="Be brief.",
        targets=[
            Target(connection.pk, KIMI_K26, {"temperature": 0.2, "max_tokens": max_tokens[0]}),
            Target(
                connection.pk, KIMI_K26, {"temperature": 0.9, "max_tokens": max_tokens[1]}, use_affinity=False
            ),
        ],
    )


@pytest.fixture
def comparison(actors: Actors, workers_connection: ProviderConnection) -> Comparison:
    return two_settings(actors, workers_connection)


@pytest.fixture
def over_budget(actors: Actors, workers_connection: ProviderConnection) -> Comparison:
    """The first target may write 100,000 tokens: at Kimi's $4.00 per million out, $0.40 at most,
    over the team's $0.05; the second's 64 tokens cost a fraction of a cent."""
    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal("0.05"), alert_thresholds=[])
    return two_settings(actors, workers_connection, max_tokens=(100_000, 64))


async def run(socket: Socket, action: str = "run") -> list[str]:
    """Send `action` and gather the frames until the run has ended."""
    await socket.send(action=action)
    return await socket.receive_until(RUN_END)


async def columns(comparison: Comparison) -> list[ComparisonColumn]:
    return [column async for column in ComparisonColumn.objects.filter(comparison=comparison)]


async def answers(comparison: Comparison, run: int = 1) -> list[ComparisonAnswer]:
    """Turn 1's answers in `run`, in the columns' order."""
    query = ComparisonAnswer.objects.filter(turn__comparison=comparison, turn__number=1, run=run)
    return [answer async for answer in query.select_related("usage_record").order_by("column__position")]


async def test_each_column_is_its_own_request_with_its_own_record_on_the_compare_path(
    open_compare: OpenCompare, comparison: Comparison, fake_upstream: FakeUpstream
) -> None:
    socket = open_compare("owner", comparison.pk)
    assert (await socket.connect())[0]
    frames = await run(socket)
    await socket.disconnect()

    first, second = await columns(comparison)
    answer_1, answer_2 = await answers(comparison)
    sent = sorted(fake_upstream.requests, key=lambda request: request.json["temperature"])
    assert [request.json["temperature"] for request in sent] == [0.2, 0.9]
    assert sent[0].json["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a colour."},
    ]
    assert sent[0].headers["x-session-affinity"] == first.affinity_key
    assert "x-session-affinity" not in sent[1].headers, "affinity off for the second target"
    compared = UsageRecord.objects.filter(path=RequestPath.COMPARE)
    by_source = {record.source: record async for record in compared}
    sources = [f"compare-column:{first.pk}:1", f"compare-column:{second.pk}:1"]
    assert sorted(by_source) == sorted(sources)  # (not by source: "...:10:1" sorts before "...:9:1")
    records = [by_source[source] for source in sources]
    assert {record.status for record in records} == {UsageStatus.OK}
    assert [answer_1.usage_record_id, answer_2.usage_record_id] == [record.pk for record in records]
    assert answer_1.content and answer_2.content
    ends = [frame for frame in frames if COLUMN_END in frame]
    assert len(ends) == 2
    for end in ends:
        assert " in · " in end and "cached" in end and " out" in end  # tokens in / cached / out
        assert 'class="figure-cost"' in end and "$" in end
        assert 'class="figure-ttft"' in end and 'class="figure-latency"' in end


async def test_a_column_over_budget_is_refused_in_its_column_and_the_other_still_runs(
    open_compare: OpenCompare, over_budget: Comparison, fake_upstream: FakeUpstream
) -> None:
    comparison = over_budget
    socket = open_compare("owner", comparison.pk)
    assert (await socket.connect())[0]
    frames = await run(socket)
    await socket.disconnect()

    refused, answered = await answers(comparison)
    assert refused.usage_record is not None and answered.usage_record is not None
    assert refused.usage_record.status == UsageStatus.REJECTED
    assert refused.usage_record.error_code == BUDGET_EXCEEDED
    assert refused.usage_record.path == RequestPath.COMPARE and refused.usage_record.total_cost == 0
    assert answered.usage_record.status == UsageStatus.OK and answered.content
    assert len(fake_upstream.requests) == 1 and fake_upstream.requests[0].json["max_tokens"] == 64
    cell = f'id="cell-t{refused.turn_id}c{refused.column_id}"'
    refusal = next(frame for frame in frames if cell in frame and COLUMN_END in frame)
    assert "Rejected" in refusal
    assert (
        html.escape(refused.usage_record.error_text) in refusal
    )  # "This request could cost up to $0.40; ..."
    assert "budget remains this month" in refused.usage_record.error_text


async def test_the_pages_own_run_is_made_once_and_a_rerun_makes_new_records_and_keeps_the_first(
    open_compare: OpenCompare, comparison: Comparison, fake_upstream: FakeUpstream
) -> None:
    socket = open_compare("owner", comparison.pk)
    assert (await socket.connect())[0]
    await run(socket)
    await socket.send(action="run")  # a reload sends it again: nothing is sent upstream
    await socket.send(action="rerun")
    await socket.receive_until(RUN_END)
    await socket.disconnect()

    assert len(fake_upstream.requests) == 4
    first, _ = await columns(comparison)
    sources = [
        source
        async for source in UsageRecord.objects.filter(path=RequestPath.COMPARE).values_list(
            "source", flat=True
        )
    ]
    mine = sorted(source for source in sources if source.startswith(f"compare-column:{first.pk}:"))
    assert len(sources) == 4 and mine == [f"compare-column:{first.pk}:1", f"compare-column:{first.pk}:2"]
    assert first.attempt == 2
    before, after = (await answers(comparison, run=1))[0], (await answers(comparison, run=2))[0]
    assert before.usage_record is not None and before.usage_record.source == f"compare-column:{first.pk}:1"
    assert before.content, "the first run's answer is kept"
    assert after.usage_record is not None and after.usage_record.source == f"compare-column:{first.pk}:2"


def test_the_request_log_links_a_columns_record_to_its_comparison(
    actors: Actors, comparison: Comparison
) -> None:
    column = comparison.columns.first()
    assert column is not None
    record = UsageRecord.objects.create(
        team=actors.team, model_id=KIMI_K26, path=RequestPath.COMPARE, source=f"compare-column:{column.pk}:1"
    )
    (link,) = record_source_links(team_id=actors.team.pk, records=[record])
    assert link is not None and link.url == f"/chat/compare/{comparison.pk}/"
    (elsewhere,) = record_source_links(team_id=actors.other_team.pk, records=[record])
    assert elsewhere is not None and elsewhere.url == "", "another team's column never resolves"


SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "colour",
        "strict": True,
        "schema": {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]},
    },
}


@pytest.fixture
def schema_comparison(
    actors: Actors, workers_connection: ProviderConnection, conversation: Conversation
) -> Comparison:
    conversation.response_format = SCHEMA
    conversation.save()
    return comparison_create(
        user=actors.owner,
        prompt="A colour as JSON.",
        conversation_id=conversation.pk,
        targets=[
            Target(workers_connection.pk, KIMI_K26),
            Target(workers_connection.pk, KIMI_K26, {"temperature": 1}),
        ],
    )


async def test_each_column_says_whether_its_answer_matches_the_schema(
    open_compare: OpenCompare, schema_comparison: Comparison, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.default_text = '{"colour": 5}'
    socket = open_compare("owner", schema_comparison.pk)
    assert (await socket.connect())[0]
    frames = await run(socket)
    await socket.disconnect()

    assert all(request.json["response_format"]["type"] == "json_schema" for request in fake_upstream.requests)
    for answer in await answers(schema_comparison):
        assert answer.structured is not None and answer.structured["valid"] is False
        assert answer.structured["errors"][0]["path"] == "$.colour"
    ends = [frame for frame in frames if COLUMN_END in frame]
    assert len(ends) == 2 and all("badge-invalid" in end for end in ends)
    records = [record async for record in UsageRecord.objects.filter(path=RequestPath.COMPARE)]
    assert len(records) == 2
    assert all((record.schema_name, record.schema_valid) == ("colour", False) for record in records)
    assert all((record.schema_errors or [{}])[0].get("path") == "$.colour" for record in records)


async def test_stop_cancels_every_column_upstream_and_each_keeps_a_stopped_record(
    open_compare: OpenCompare, comparison: Comparison, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(sse(SLOW_WORDS, delay=0.2), sse(SLOW_WORDS, delay=0.2))
    socket = open_compare("owner", comparison.pk)
    assert (await socket.connect())[0]
    await socket.send(action="run")
    await socket.receive_until('-text" hx-swap-oob="beforeend"')  # a first word is in
    await socket.send(action="stop")
    frames = await socket.receive_until(RUN_END)
    await socket.disconnect()

    assert len([frame for frame in frames if COLUMN_END in frame]) == 2
    for answer in await answers(comparison):
        record = answer.usage_record
        assert record is not None and record.path == RequestPath.COMPARE
        assert (record.status, record.error_code) == (UsageStatus.CLIENT_DISCONNECTED, STOPPED_BY_USER)
    for index in range(2):
        assert (await fake_upstream.wait_ended(index)).disconnected, "the upstream request was cancelled"


def test_a_target_whose_connection_was_deleted_is_refused_alone_and_sends_nothing(
    actors: Actors, comparison: Comparison, fake_upstream: FakeUpstream
) -> None:
    gone = comparison.columns.get(position=0)
    ComparisonColumn.objects.filter(pk=gone.pk).update(connection=None)

    started = comparison_run_start(user=actors.owner, comparison_id=comparison.pk, first=True)

    assert started is not None
    refused, kept = started.columns
    assert (refused.call, refused.answer.refusal) == (None, "This target's connection was deleted.")
    assert refused.answer.ended_at is not None, "stored as ended: it never holds the next turn back"
    assert kept.call is not None and kept.call.context.path == RequestPath.COMPARE
    page = client_for(actors.owner).get(f"/chat/compare/{comparison.pk}/")
    assert b"This target&#x27;s connection was deleted." in page.content
    assert fake_upstream.requests == []
