"""A chat turn's record as a span, and a chat that goes on as usual while the collector hangs."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable

import pytest
from asgiref.sync import sync_to_async

from playground.chat.models import Conversation
from playground.usage.models import UsageRecord
from playground.usage.telemetry import spans_flush
from tests.fakes.otlp import OtlpReceiver
from tests.fakes.upstream import FakeUpstream, native_frame, sse, usage
from tests.support.sockets import Socket

pytestmark = pytest.mark.django_db(transaction=True)

OpenSocket = Callable[[str | None, int], Socket]


def _script(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(sse([native_frame("Hello."), native_frame("", usage=usage(1234, 56, cached=1000))]))


async def test_a_chat_turn_is_one_span_with_its_conversation(
    open_socket: OpenSocket,
    conversation: Conversation,
    fake_upstream: FakeUpstream,
    otlp_receiver: OtlpReceiver,
) -> None:
    _script(fake_upstream)
    await open_socket("owner", conversation.pk).exchange("Say hello")
    record = await UsageRecord.objects.aget(conversation_id=conversation.pk)
    assert await sync_to_async(spans_flush)(timeout_millis=10_000)

    attributes = otlp_receiver.by_record()[str(record.request_id)].attributes
    assert attributes["gen_ai.conversation.id"] == str(conversation.pk)
    assert attributes["gen_ai.usage.input_tokens"] == 1234
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 1000
    assert attributes["gen_ai.usage.output_tokens"] == 56
    assert attributes["playground.path"] == "chat"


async def test_chat_turns_end_as_usual_with_their_records_while_the_collector_hangs(
    open_socket: OpenSocket,
    conversation: Conversation,
    fake_upstream: FakeUpstream,
    hanging_collector: socket.socket,
) -> None:
    async def turn(question: str) -> float:
        _script(fake_upstream)
        started = time.monotonic()
        await open_socket("owner", conversation.pk).exchange(question)
        return time.monotonic() - started

    await turn("One")
    # The exporter's thread now waits on the collector (up to its 3 s timeout) ...
    flushed_after: list[float] = []

    def flush() -> None:
        started = time.monotonic()
        spans_flush(timeout_millis=10_000)
        flushed_after.append(time.monotonic() - started)

    flushing = threading.Thread(target=flush)
    flushing.start()
    await asyncio.sleep(0.3)
    # ... while the next turns stream and end at their usual pace.
    durations = [await turn("Two"), await turn("Three")]
    await sync_to_async(flushing.join, thread_sensitive=False)(15)

    assert max(durations) < 2.0, durations
    assert flushed_after[0] > 0.3 + sum(durations)  # the exporter hung all the while
    records = [record async for record in UsageRecord.objects.filter(conversation_id=conversation.pk)]
    assert len(records) == 3
    assert all(record.status == "ok" and record.prompt_tokens == 1234 for record in records)
