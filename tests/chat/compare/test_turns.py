"""Compare over several turns, over the compare socket against the loopback fake Workers AI
upstream: each column sends its own history, its totals add up its turns' records, a rerun
keeps the answers it replaces, "Continue with this one" takes every turn, and the pre-flight
prices each column's next request before it is sent."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from playground.catalog.seed import KIMI_K26
from playground.chat.compare.forms import target_value
from playground.chat.compare.models import Comparison, ComparisonAnswer, ComparisonColumn, ComparisonTurn
from playground.chat.compare.preflight import comparison_preflight
from playground.chat.compare.presenters import comparison_page
from playground.chat.compare.runs import comparison_turn_send
from playground.chat.compare.services import Target, comparison_continue, comparison_create
from playground.chat.models import Message, MessageRole
from playground.chat.services.history import upstream_messages
from playground.providers.adapters import ChatRequest
from playground.providers.models import ProviderConnection
from playground.usage.budgets import BUDGET_EXCEEDED
from playground.usage.estimates import cost_estimate
from playground.usage.metering import estimate_tokens
from playground.usage.models import RequestPath, TeamBudget, UsageRecord, UsageStatus
from playground.usage.money import money
from playground.usage.records import price_card_known
from tests.chat.compare.conftest import RUN_END, OpenCompare
from tests.fakes.upstream import (
    FakeUpstream,
    JsonReply,
    RecordedRequest,
    Reply,
    Sse,
    computed,
    error,
    native_frame,
    sse,
    usage,
)
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.sockets import SLOW_WORDS

pytestmark = pytest.mark.django_db(transaction=True)

FOLLOW_UPS = ("And a second one?", "A third, please.")


def turn_of(request: RecordedRequest) -> int:
    return sum(1 for message in request.json["messages"] if message["role"] == "user")


def answer_by_column(request: RecordedRequest) -> Sse:
    """An answer naming the turn and the column's temperature, with usage that grows each turn:
    100 prompt tokens a turn, 40 of each earlier turn's cached, 7 out."""
    turn = turn_of(request)
    text = f"T{turn} at {request.json['temperature']}"
    counts = usage(100 * turn, 7, cached=40 * (turn - 1))
    return sse([native_frame(text), native_frame("", usage=counts)])


@pytest.fixture
def comparison(actors: Actors, workers_connection: ProviderConnection) -> Comparison:
    """Kimi twice, at two temperatures."""
    return comparison_create(
        user=actors.owner,
        prompt="Name a colour.",
        system_prompt="Be brief.",
        targets=[
            Target(workers_connection.pk, KIMI_K26, {"temperature": 0.2, "max_tokens": 64}),
            Target(workers_connection.pk, KIMI_K26, {"temperature": 0.9, "max_tokens": 64}),
        ],
    )


# One socket message and the replies its columns' requests take, in the order they are sent.
Step = tuple[dict[str, str], Sequence[Reply]]
BY_COLUMN = [computed(answer_by_column)] * 2
THREE_TURNS: list[Step] = [
    ({"action": "run"}, BY_COLUMN),
    *(({"action": "send", "message": text}, BY_COLUMN) for text in FOLLOW_UPS),
]


def drive(
    open_compare: OpenCompare, comparison: Comparison, upstream: FakeUpstream, steps: list[Step]
) -> list[str]:
    """The owner's socket on the comparison sends each step's message and waits for its run to
    end; every frame it received."""

    async def steps_run() -> list[str]:
        socket = open_compare("owner", comparison.pk)
        assert (await socket.connect())[0]
        frames: list[str] = []
        for message, replies in steps:
            upstream.script(*replies)
            await socket.send(**message)
            frames += await socket.receive_until(RUN_END)
        await socket.disconnect()
        return frames

    return async_to_sync(steps_run)()


def by_column(upstream: FakeUpstream) -> dict[float, list[RecordedRequest]]:
    """The upstream's requests by the column's temperature, in the order they were sent."""
    sent: dict[float, list[RecordedRequest]] = {}
    for request in upstream.requests:
        sent.setdefault(request.json["temperature"], []).append(request)
    return sent


def test_each_columns_second_and_third_requests_carry_its_own_earlier_answers(
    open_compare: OpenCompare, comparison: Comparison, fake_upstream: FakeUpstream
) -> None:
    frames = drive(open_compare, comparison, fake_upstream, THREE_TURNS)

    sent = by_column(fake_upstream)
    assert sorted(sent) == [0.2, 0.9] and all(len(requests) == 3 for requests in sent.values())
    for temperature, requests in sent.items():
        system = {"role": "system", "content": "Be brief."}
        assert requests[0].json["messages"] == [system, {"role": "user", "content": "Name a colour."}]
        assert requests[2].json["messages"] == [
            system,
            {"role": "user", "content": "Name a colour."},
            {"role": "assistant", "content": f"T1 at {temperature}"},  # its own answer, not the other's
            {"role": "user", "content": FOLLOW_UPS[0]},
            {"role": "assistant", "content": f"T2 at {temperature}"},
            {"role": "user", "content": FOLLOW_UPS[1]},
        ]
        assert requests[1].json["messages"] == requests[2].json["messages"][:4]
    turns = ComparisonTurn.objects.filter(comparison=comparison).order_by("number")
    assert [(turn.number, turn.content) for turn in turns] == [
        (1, "Name a colour."),
        (2, FOLLOW_UPS[0]),
        (3, FOLLOW_UPS[1]),
    ]
    records = UsageRecord.objects.filter(path=RequestPath.COMPARE, status=UsageStatus.OK)
    assert records.count() == 6, "one record per turn per column"
    assert sum('hx-swap-oob="beforeend:#compare-turns"' in frame for frame in frames) == 2, (
        "turns 2 and 3 appended"
    )


def test_a_columns_totals_are_the_sum_of_its_turns_records(
    actors: Actors, open_compare: OpenCompare, comparison: Comparison, fake_upstream: FakeUpstream
) -> None:
    drive(open_compare, comparison, fake_upstream, THREE_TURNS)

    page = comparison_page(comparison)
    for total in page.totals:
        records = list(
            UsageRecord.objects.filter(source__startswith=f"compare-column:{total.column.id}:").order_by("pk")
        )
        assert len(records) == 3 and total.turns == 3
        prompt = sum(record.prompt_tokens for record in records)
        cached = sum(record.cached_tokens or 0 for record in records)
        assert (prompt, cached) == (600, 120)  # 100 + 200 + 300 in; 0 + 40 + 80 cached
        assert total.tokens_in == "600 in" and total.cached == "120 cached (20%)"
        assert total.tokens_out == "21 out"
        assert total.cost == money(sum((record.total_cost for record in records), Decimal(0)))
        ttfts = [record.ttft_ms for record in records]
        assert None not in ttfts and total.ttft.endswith(" mean")
        assert total.all_runs_cost == "", "no rerun"
    html = client_for(actors.owner).get(f"/chat/compare/{comparison.pk}/").content.decode()
    assert html.count('class="figure-cost"') == 6 and html.count('class="figure-ttft"') == 6
    assert html.count('class="total-cost"') == 2 and "120 cached (20%)" in html
    assert "Run history (3 runs)" in html and "Turn 3 sent" in html


def test_a_rerun_keeps_the_answers_it_replaces_and_the_next_turn_sends_the_new_one(
    actors: Actors, open_compare: OpenCompare, comparison: Comparison, fake_upstream: FakeUpstream
) -> None:
    rerun = sse([native_frame("Rerun answer"), native_frame("", usage=usage(100, 2))])
    steps: list[Step] = [
        ({"action": "run"}, BY_COLUMN),
        ({"action": "rerun"}, [rerun, rerun]),
        ({"action": "send", "message": FOLLOW_UPS[0]}, BY_COLUMN),
    ]
    drive(open_compare, comparison, fake_upstream, steps)

    first = ComparisonColumn.objects.get(comparison=comparison, position=0)
    runs = list(ComparisonAnswer.objects.filter(column=first, turn__number=1).order_by("run"))
    assert [(answer.run, answer.content) for answer in runs] == [(1, "T1 at 0.2"), (2, "Rerun answer")]
    assert all(answer.usage_record_id for answer in runs), "the first run keeps its record too"
    turn_2 = by_column(fake_upstream)[0.2][-1].json["messages"]
    assert turn_2[2] == {"role": "assistant", "content": "Rerun answer"}, "the newest run is the history"
    page = comparison_page(comparison)
    cell = page.cell(turn_id=runs[0].turn_id, column_id=first.pk)
    assert cell.answer is not None and cell.answer.run == 2
    assert [earlier.run for earlier in cell.earlier] == [1]
    assert [row.what for row in page.history] == ["Turn 2 sent", "Turn 1 rerun (run 2)", "Turn 1 sent"]
    assert all(row.by == "owner" for row in page.history)
    total = page.totals[0]
    assert total.all_runs_cost != "" and total.turns == 2
    html = client_for(actors.owner).get(f"/chat/compare/{comparison.pk}/").content.decode()
    assert "Earlier run of this turn (1)" in html and "T1 at 0.2" in html


def test_continue_makes_a_conversation_holding_every_turn(
    actors: Actors, open_compare: OpenCompare, comparison: Comparison, fake_upstream: FakeUpstream
) -> None:
    drive(open_compare, comparison, fake_upstream, THREE_TURNS)
    column = ComparisonColumn.objects.get(comparison=comparison, position=1)

    conversation = comparison_continue(user=actors.teammate, comparison_id=comparison.pk, column_id=column.pk)

    assert (conversation.user_id, conversation.model_id) == (actors.teammate.pk, KIMI_K26)
    assert conversation.parameters == {"temperature": 0.9, "max_tokens": 64}
    messages = list(Message.objects.filter(conversation=conversation).order_by("pk"))
    assert [(message.role, message.content) for message in messages] == [
        (MessageRole.USER, "Name a colour."),
        (MessageRole.ASSISTANT, "T1 at 0.9"),
        (MessageRole.USER, FOLLOW_UPS[0]),
        (MessageRole.ASSISTANT, "T2 at 0.9"),
        (MessageRole.USER, FOLLOW_UPS[1]),
        (MessageRole.ASSISTANT, "T3 at 0.9"),
    ]
    assert [message.parent_id for message in messages] == [None, *(message.pk for message in messages[:-1])]
    assert conversation.current_leaf_id == messages[-1].pk
    records = [answer.usage_record_id for answer in column.answers.order_by("turn__number")]
    assert [message.usage_record_id for message in messages[1::2]] == records
    # The conversation's next request is the column's: the same history, the chat's way.
    last = by_column(fake_upstream)[0.9][-1].json["messages"]
    assert upstream_messages(conversation) == [*last, {"role": "assistant", "content": "T3 at 0.9"}]
    again = comparison_continue(user=actors.owner, comparison_id=comparison.pk, column_id=column.pk)
    assert again.pk == conversation.pk, "a second press opens the same conversation"


def test_the_preflight_prices_each_columns_next_request_and_their_total(
    actors: Actors, open_compare: OpenCompare, comparison: Comparison, fake_upstream: FakeUpstream
) -> None:
    drive(open_compare, comparison, fake_upstream, THREE_TURNS)

    preflight = comparison_preflight(comparison=comparison, sender_id=actors.owner.pk, text="  Fourth?  ")

    card = price_card_known(model_id=KIMI_K26, day=timezone.now().date(), team_id=actors.team.pk)
    expected_total = Decimal(0)
    for item, temperature in zip(preflight.columns, (0.2, 0.9), strict=True):
        figures = item.figures
        assert figures is not None and not item.refused
        last = by_column(fake_upstream)[temperature][-1].json["messages"]
        next_request = ChatRequest(
            model=KIMI_K26,
            messages=[
                *last,
                {"role": "assistant", "content": f"T3 at {temperature}"},
                {"role": "user", "content": "Fourth?"},
            ],
        )
        assert figures.prompt_tokens == estimate_tokens(next_request.prompt_chars)
        assert (figures.basis, figures.so_far.turns) == ("conversation", 3), "its own three answers"
        assert figures.cache_share == Decimal(120) / Decimal(600)
        assert figures.at_most.output_tokens == 64 and figures.expected.output_tokens == 7
        expected = cost_estimate(
            card=card,
            prompt_tokens=figures.prompt_tokens,
            output_tokens=7,
            cache_share=Decimal(120) / Decimal(600),
        )
        assert figures.expected.cost == expected.cost
        expected_total += expected.cost or Decimal(0)
    assert preflight.expected == expected_total
    assert preflight.at_most == sum(
        (item.figures.at_most.cost or Decimal(0) for item in preflight.columns if item.figures), Decimal(0)
    )
    html = (
        client_for(actors.owner)
        .post(f"/chat/compare/{comparison.pk}/preflight/", {"message": "Fourth?"})
        .content.decode()
    )
    assert f"expected {money(expected_total)}" in html and "Will be refused" not in html


def test_a_column_over_budget_is_refused_alone_in_the_preflight_and_in_the_next_turn(
    actors: Actors,
    workers_connection: ProviderConnection,
    open_compare: OpenCompare,
    fake_upstream: FakeUpstream,
) -> None:
    """The first target may write 100,000 tokens: at Kimi's $4.00 per million out, $0.40 at
    most, over the team's $0.05; the second's 64 tokens cost a fraction of a cent."""
    comparison = comparison_create(
        user=actors.owner,
        prompt="Name a colour.",
        targets=[
            Target(workers_connection.pk, KIMI_K26, {"temperature": 0.2, "max_tokens": 100_000}),
            Target(workers_connection.pk, KIMI_K26, {"temperature": 0.9, "max_tokens": 64}),
        ],
    )
    Comparison.objects.filter(pk=comparison.pk).update(runs=1)  # as if turn 1 had run
    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal("0.05"), alert_thresholds=[])

    preflight = comparison_preflight(comparison=comparison, sender_id=actors.owner.pk, text="Another?")
    refused, fits = preflight.columns
    assert refused.refused and refused.figures is not None
    assert (
        refused.figures.budget_refusal is not None
        and "budget remains this month" in refused.figures.budget_refusal
    )
    assert not fits.refused and fits.figures is not None
    assert preflight.at_most == fits.figures.at_most.cost, "the total counts the columns that will be sent"
    html = (
        client_for(actors.owner)
        .post(f"/chat/compare/{comparison.pk}/preflight/", {"message": "Another?"})
        .content.decode()
    )
    assert html.count("Will be refused:") == 1 and 'id="preflight-target-1"' in html

    drive(open_compare, comparison, fake_upstream, [({"action": "send", "message": "Another?"}, [])])
    answers = {
        answer.column.position: answer
        for answer in ComparisonAnswer.objects.select_related("usage_record", "column")
    }
    assert answers[0].usage_record is not None and answers[0].usage_record.error_code == BUDGET_EXCEEDED
    assert answers[1].usage_record is not None and answers[1].usage_record.status == UsageStatus.OK
    assert len(fake_upstream.requests) == 1 and fake_upstream.requests[0].json["max_tokens"] == 64


def test_a_failed_turn_is_left_out_of_that_columns_history_only(
    open_compare: OpenCompare, comparison: Comparison, fake_upstream: FakeUpstream
) -> None:
    failing = computed(lambda request: failing_for(request, 0.2))
    steps: list[Step] = [
        ({"action": "run"}, BY_COLUMN),
        ({"action": "send", "message": FOLLOW_UPS[0]}, [failing, failing]),
        ({"action": "send", "message": FOLLOW_UPS[1]}, BY_COLUMN),
    ]
    drive(open_compare, comparison, fake_upstream, steps)

    sent = by_column(fake_upstream)
    failed_column = [message["content"] for message in sent[0.2][-1].json["messages"]]
    other_column = [message["content"] for message in sent[0.9][-1].json["messages"]]
    assert failed_column == ["Be brief.", "Name a colour.", "T1 at 0.2", FOLLOW_UPS[1]]
    assert other_column == [
        "Be brief.",
        "Name a colour.",
        "T1 at 0.9",
        FOLLOW_UPS[0],
        "T2 at 0.9",
        FOLLOW_UPS[1],
    ]


def failing_for(request: RecordedRequest, temperature: float) -> Sse | JsonReply:
    """An upstream error (one no retry repeats) for the column at `temperature`, an answer for the other."""
    return error(400) if request.json["temperature"] == temperature else answer_by_column(request)


def test_a_next_turn_that_is_empty_or_sent_before_the_first_run_is_refused_and_stores_nothing(
    actors: Actors, comparison: Comparison
) -> None:
    with pytest.raises(ValidationError, match="The first turn has not run yet"):
        comparison_turn_send(user=actors.owner, comparison_id=comparison.pk, text="Too soon")
    Comparison.objects.filter(pk=comparison.pk).update(runs=1)
    with pytest.raises(ValidationError, match="Type a message first"):
        comparison_turn_send(user=actors.owner, comparison_id=comparison.pk, text="   ")
    assert ComparisonTurn.objects.filter(comparison=comparison).count() == 1
    assert not ComparisonAnswer.objects.exists()


async def test_a_next_turn_sent_while_another_tab_runs_is_refused_with_a_notice_and_kept_in_the_box(
    open_compare: OpenCompare, comparison: Comparison, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(sse(SLOW_WORDS, delay=0.2), sse(SLOW_WORDS, delay=0.2))
    running, other = open_compare("owner", comparison.pk), open_compare("owner", comparison.pk)
    assert (await running.connect())[0] and (await other.connect())[0]
    await running.send(action="run")
    await running.receive_until('-text" hx-swap-oob="beforeend"')

    await other.send(action="send", message="Meanwhile?")
    notice = await other.receive()
    await running.send(action="stop")
    await running.receive_until(RUN_END)
    await running.disconnect()
    await other.disconnect()

    assert "still answering (in this or another tab)" in notice
    assert 'id="compare-input-field"' not in notice, "the box keeps what was typed"
    assert await ComparisonTurn.objects.filter(comparison=comparison).acount() == 1


BEFORE = ("chat", "0011_prompt_variables")


def test_the_migration_makes_each_existing_columns_answer_turn_one(actors: Actors) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    old = executor.loader.project_state([BEFORE]).apps
    record = old.get_model("usage", "UsageRecord").objects.create(
        team_id=actors.team.pk, user_id=actors.teammate.pk, model_id=KIMI_K26, status="ok", path="compare"
    )
    comparison = old.get_model("chat", "Comparison").objects.create(
        team_id=actors.team.pk, user_id=actors.owner.pk, prompt="Old prompt", runs=2
    )
    column = old.get_model("chat", "ComparisonColumn").objects.create(
        comparison=comparison,
        position=0,
        model_id=KIMI_K26,
        attempt=2,
        content="Old answer",
        usage_record=record,
    )
    never = old.get_model("chat", "ComparisonColumn").objects.create(
        comparison=comparison, position=1, model_id=KIMI_K26
    )

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    (turn,) = ComparisonTurn.objects.filter(comparison_id=comparison.pk)
    assert (turn.number, turn.content, turn.user_id) == (1, "Old prompt", actors.owner.pk)
    (answer,) = ComparisonAnswer.objects.filter(turn=turn)
    assert (answer.column_id, answer.run, answer.content) == (column.pk, 2, "Old answer")
    assert (answer.usage_record_id, answer.user_id) == (record.pk, actors.teammate.pk)
    assert answer.ended_at is not None
    assert not ComparisonAnswer.objects.filter(column_id=never.pk).exists(), (
        "a column never run has no answer"
    )


def test_the_form_prices_the_first_turn_per_target_before_anything_is_stored(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal("0.05"), alert_thresholds=[])
    target = target_value(workers_connection.pk, KIMI_K26)
    form = {"prompt": "Name a colour.", "t0-target": target, "t0-max_tokens": "100000", "t1-target": target}
    client = client_for(actors.owner)

    priced = client.post("/chat/compare/preflight/", form).content.decode()
    empty = client.post("/chat/compare/preflight/", {**form, "prompt": " "}).content.decode()

    assert "First turn, every column sent" in priced and "expected $" in priced
    assert 'id="preflight-target-1"' in priced and 'id="preflight-target-2"' in priced
    assert priced.count("Will be refused:") == 1, "100,000 tokens out may cost $0.40, over the $0.05"
    assert "Type the prompt and choose two targets" in empty
    assert not Comparison.objects.exists(), "pricing the form stores nothing"
