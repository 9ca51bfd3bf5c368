"""An upstream that lies must not cost the user their answer nor the team its usage record.

End to end: the loopback fake upstream sends the hostile frame through a real socket to the
real ASGI app, and each test reads the stored answer and usage record from the database.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import pytest
from channels.db import database_sync_to_async

from playground.chat.models import Conversation, Message, MessageRole
from playground.chat.services.turns import chat_turn_start
from playground.usage.calls.call import STREAM_FAILED
from playground.usage.models import UsageRecord, UsageSource, UsageStatus
from playground.usage.pricing import Cost, cost_for
from playground.usage.records import RECORD_WRITE_FAILED
from tests.fakes.upstream import FakeUpstream, native_frame, openai_chunk, sse, usage
from tests.support.actors import Actors
from tests.support.sockets import Socket

pytestmark = pytest.mark.django_db(transaction=True)

OpenSocket = Callable[[str | None, int], Socket]
ANSWER = [native_frame("Hello "), native_frame("world.")]


async def stored(conversation: Conversation) -> tuple[Message, UsageRecord]:
    """The turn's saved answer and its usage record."""
    answer = await Message.objects.select_related("usage_record").aget(
        conversation=conversation, role=MessageRole.ASSISTANT
    )
    record = await UsageRecord.objects.aget(conversation_id=conversation.pk)
    assert answer.usage_record_id == record.pk
    return answer, record


# --- A: absurd usage figures ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("figure", "raw_figure"),
    [
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (3_000_000_000, 3_000_000_000),
        (2_000_000_000, 2_000_000_000),  # fits the column, but Kimi K2.6 reads at most 262,144
        (1e30, pytest.approx(1e30)),  # PostgreSQL's jsonb gives it back as an integer
    ],
    ids=["NaN", "Infinity", "3,000,000,000", "far above the context window", "1e30"],
)
async def test_absurd_usage_figures_are_recorded_as_estimated_and_flagged_and_the_answer_is_kept(
    open_socket: OpenSocket,
    conversation: Conversation,
    fake_upstream: FakeUpstream,
    figure: Any,
    raw_figure: Any,
) -> None:
    fake_upstream.script(sse([*ANSWER, native_frame("", usage=usage(figure, 56))]))
    frames = await open_socket("owner", conversation.pk).exchange("Hello?")

    answer, record = await stored(conversation)
    assert answer.content == "Hello world."
    assert record.status == UsageStatus.OK  # nobody disconnected
    assert record.usage_source == UsageSource.ESTIMATED
    assert record.usage_implausible
    assert record.completion_tokens == 3  # "Hello world." at 4 characters per token
    assert 0 < record.prompt_tokens < 100
    assert record.cached_tokens is None
    assert record.raw_usage is not None and record.raw_usage["prompt_tokens"] == raw_figure
    assert "usage figures were absurd" in frames[-1]


async def test_a_nan_beside_plausible_figures_is_stored_json_safe_with_the_providers_figures(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(sse([*ANSWER, native_frame("", usage={**usage(12, 3), "neurons": float("nan")})]))
    await open_socket("owner", conversation.pk).exchange("Hello?")

    _, record = await stored(conversation)
    assert record.usage_source == UsageSource.PROVIDER
    assert not record.usage_implausible
    assert (record.prompt_tokens, record.completion_tokens) == (12, 3)
    assert record.raw_usage == {**usage(12, 3), "neurons": "NaN"}


# --- records are always written ---------------------------------------------------------------


BrokenExchange = Callable[[str, Exception], Awaitable[list[str]]]


@pytest.fixture
def exchange_with_broken(
    open_socket: OpenSocket,
    conversation: Conversation,
    fake_upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> BrokenExchange:
    """One healthy exchange in which a function (a dotted path) raises the given error."""

    async def exchange(target: str, error: Exception) -> list[str]:
        def broken(**kwargs: Any) -> None:
            raise error

        monkeypatch.setattr(target, broken)
        fake_upstream.script(sse([*ANSWER, native_frame("", usage=usage(12, 3))]))
        return await open_socket("owner", conversation.pk).exchange("Hello?")

    return exchange


async def test_a_record_that_cannot_be_written_in_full_leaves_a_minimal_one_and_the_answer(
    conversation: Conversation, exchange_with_broken: BrokenExchange
) -> None:
    frames = await exchange_with_broken("playground.usage.records.cost_for", ArithmeticError("too big"))

    answer, record = await stored(conversation)
    assert answer.content == "Hello world."
    assert record.status == UsageStatus.OK
    assert record.error_code == RECORD_WRITE_FAILED
    assert "The full usage record could not be written (ArithmeticError)" in frames[-1]


async def test_the_answer_is_saved_even_when_no_record_at_all_can_be_written(
    conversation: Conversation, exchange_with_broken: BrokenExchange
) -> None:
    frames = await exchange_with_broken(
        "playground.usage.calls.settlement.usage_record_create",
        ConnectionError("the usage table is unavailable"),
    )

    answer = await Message.objects.aget(conversation=conversation, role=MessageRole.ASSISTANT)
    assert answer.content == "Hello world."
    assert answer.usage_record_id is None
    assert "Hello world." in frames[-1]


async def test_a_second_cancellation_while_the_record_is_written_loses_neither_record_nor_answer(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    writing = threading.Event()

    def slow_cost_for(**kwargs: Any) -> Cost:
        writing.set()
        time.sleep(0.3)
        return cost_for(**kwargs)

    monkeypatch.setattr("playground.usage.records.cost_for", slow_cost_for)
    fake_upstream.script(sse([native_frame(f"word{i} ") for i in range(30)], delay=0.2))
    turn = await database_sync_to_async(chat_turn_start)(
        user=actors.owner, conversation_id=conversation.pk, text="Count slowly"
    )
    first_word = asyncio.Event()

    async def consume() -> None:
        async with aclosing(turn.events()) as events:
            async for _ in events:
                first_word.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_word.wait(), 5)
    task.cancel()  # Stop...
    assert await asyncio.to_thread(writing.wait, 5)
    task.cancel()  # ...then the socket closes while the record is being written
    with pytest.raises(asyncio.CancelledError):
        await task

    answer, record = await stored(conversation)
    assert record.status == UsageStatus.CLIENT_DISCONNECTED
    assert answer.content.startswith("word0")


# --- C: malformed frames ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "what"),
    [
        ({"choices": [{"delta": "x"}]}, "a choice's delta is not an object"),
        (
            openai_chunk(
                tool_calls=[{"index": 0, "id": "call_1", "function": {"name": 42, "arguments": "{}"}}]
            ),
            "a tool call's name is not text",
        ),
        (
            openai_chunk(
                tool_calls=[{"index": 0, "id": ["call_1"], "function": {"name": "f", "arguments": ""}}]
            ),
            "a tool call's id is not text",
        ),
    ],
    ids=["a string delta", "a numeric tool name", "a list as tool call id"],
)
async def test_a_malformed_frame_is_an_upstream_error_with_a_plain_message_and_the_text_is_kept(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream, frame: Any, what: str
) -> None:
    fake_upstream.script(sse([openai_chunk("Partial "), frame, openai_chunk("never shown")]))
    frames = await open_socket("owner", conversation.pk).exchange("Hello?")

    answer, record = await stored(conversation)
    assert record.status == UsageStatus.UPSTREAM_ERROR
    assert record.error_text == f"The upstream sent a malformed reply: {what}."
    assert answer.content == "Partial "
    assert record.usage_source == UsageSource.ESTIMATED
    assert 'class="answer-error" role="alert"' in frames[-1]


async def test_an_unforeseen_failure_reading_the_stream_is_an_upstream_error_not_a_disconnect(
    open_socket: OpenSocket,
    conversation: Conversation,
    fake_upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: object, *, complete: bool) -> None:
        raise RecursionError("a reply nested too deeply")

    monkeypatch.setattr("playground.providers.adapters.assembly.EventAssembler.finish", broken)
    fake_upstream.script(sse(ANSWER))
    await open_socket("owner", conversation.pk).exchange("Hello?")

    answer, record = await stored(conversation)
    assert record.status == UsageStatus.UPSTREAM_ERROR
    assert record.error_text == STREAM_FAILED
    assert answer.content == "Hello world."


# --- D: lone surrogates and NUL ---------------------------------------------------------------


@pytest.mark.parametrize("bad", ["\ud800", "\x00"], ids=["a lone surrogate", "NUL"])
async def test_unstorable_characters_in_model_output_are_replaced_and_the_answer_is_saved(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream, bad: str
) -> None:
    fake_upstream.script(
        sse(
            [
                native_frame(f"bad {bad} text"),
                openai_chunk(reasoning=f"why {bad}"),
                native_frame("", usage=usage(5, 3)),
            ]
        )
    )
    frames = await open_socket("owner", conversation.pk).exchange("Hello?")

    answer, record = await stored(conversation)
    assert answer.content == "bad \ufffd text"
    assert answer.reasoning == "why \ufffd"
    assert record.status == UsageStatus.OK
    assert "bad \ufffd text" in frames[-1]


# --- case 19: a stream that stops without finishing ---------------------------------------------


async def test_a_stream_that_ends_without_finish_done_or_usage_is_an_upstream_error_with_the_text_kept(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(sse([openai_chunk("Half an "), openai_chunk("answer")], done=False))
    frames = await open_socket("owner", conversation.pk).exchange("Hello?")

    answer, record = await stored(conversation)
    assert record.status == UsageStatus.UPSTREAM_ERROR
    assert record.error_text == "The stream ended before the model finished."
    assert answer.content == "Half an answer"
    assert record.usage_source == UsageSource.ESTIMATED
    assert record.completion_tokens == 4  # 14 characters at 4 per token
    assert "The stream ended before the model finished." in frames[-1]


@pytest.mark.parametrize(
    "last",
    [openai_chunk(finish_reason="stop"), native_frame("", usage=usage(5, 3))],
    ids=["a finish reason", "a usage report"],
)
async def test_a_stream_that_finished_but_sent_no_done_is_ok(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream, last: dict[str, Any]
) -> None:
    fake_upstream.script(sse([openai_chunk("Whole answer"), last], done=False))
    await open_socket("owner", conversation.pk).exchange("Hello?")

    answer, record = await stored(conversation)
    assert record.status == UsageStatus.OK
    assert answer.content == "Whole answer"
