"""An upstream that lies must not cost the user their answer nor the team its usage record.

End to end: the loopback fake upstream sends the hostile frame through a real socket to the
real ASGI app, and each test reads the stored answer and usage record from the database.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from playground.chat.models import Conversation, Message, MessageRole
from playground.usage.models import UsageRecord, UsageSource, UsageStatus
from tests.chat.conftest import Socket
from tests.fakes.upstream import FakeUpstream, native_frame, openai_chunk, sse, usage

pytestmark = pytest.mark.django_db(transaction=True)

OpenSocket = Callable[[str | None, int], Socket]


async def stored(conversation: Conversation) -> tuple[Message, UsageRecord]:
    """The turn's saved answer and its usage record."""
    answer = await Message.objects.select_related("usage_record").aget(
        conversation=conversation, role=MessageRole.ASSISTANT
    )
    record = await UsageRecord.objects.aget(conversation=conversation)
    assert answer.usage_record_id == record.pk
    return answer, record


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
