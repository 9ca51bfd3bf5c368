from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

from playground.providers.adapters import ChatRequest, adapter_for
from playground.providers.adapters.openai_compat import OpenAICompatAdapter
from playground.providers.events import Finish, TextDelta, ToolCallDelta, UpstreamError, UsageReport
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.secrets import token_encrypt
from tests.fakes.upstream import (
    FakeUpstream,
    chat_completion,
    collect,
    error,
    json_reply,
    openai_chunk,
    openai_error,
    paced,
    sse,
    usage,
    usage_chunk,
)

KEY = "sk-test-4f9a8b7c6d5e4f3a2b1c"


def adapter(fake: FakeUpstream) -> OpenAICompatAdapter:
    return OpenAICompatAdapter(base_url=fake.url + "/v1/", token=KEY)


def ask(**overrides: Any) -> ChatRequest:
    fields: dict[str, Any] = {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "Hi"}],
        **overrides,
    }
    return ChatRequest(**fields)


async def test_it_posts_to_chat_completions_with_the_model_in_the_body(fake_upstream: FakeUpstream) -> None:
    await collect(adapter(fake_upstream).stream(ask(max_tokens=32, affinity_key="ses_7")))

    sent = fake_upstream.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["x-session-affinity"] == "ses_7"
    assert sent.json == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 32,
    }


async def test_it_streams_text_then_usage_then_finish(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(
        sse(
            [
                openai_chunk("Hel", chunk_id="chatcmpl-1"),
                openai_chunk("lo", chunk_id="chatcmpl-1"),
                openai_chunk(finish_reason="length", chunk_id="chatcmpl-1"),
                usage_chunk(usage(7, 2, cached=0), chunk_id="chatcmpl-1"),
            ]
        )
    )

    events = await collect(adapter(fake_upstream).stream(ask()))

    assert events[:2] == [TextDelta("Hel"), TextDelta("lo")]
    assert isinstance(events[2], UsageReport)
    assert (events[2].usage.prompt_tokens, events[2].usage.completion_tokens) == (7, 2)
    assert events[2].usage.cached_tokens == 0
    assert events[3] == Finish(reason="length", upstream_request_id="chatcmpl-1")
    assert len(events) == 4


async def test_it_stops_reading_at_done(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(sse([openai_chunk("Yes"), "[DONE]", openai_chunk(" and more")], done=False))

    events = await collect(adapter(fake_upstream).stream(ask()))

    assert [event for event in events if isinstance(event, TextDelta)] == [TextDelta("Yes")]


async def test_it_streams_parallel_tool_calls_by_index(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(
        sse(
            [
                openai_chunk(
                    tool_calls=[
                        {"index": 0, "id": "call_a", "function": {"name": "a", "arguments": ""}},
                        {"index": 1, "id": "call_b", "function": {"name": "b", "arguments": "{}"}},
                    ]
                ),
                openai_chunk(tool_calls=[{"index": 0, "function": {"arguments": "{}"}}]),
                openai_chunk(finish_reason="tool_calls"),
            ]
        )
    )

    events = await collect(adapter(fake_upstream).stream(ask()))

    assert events == [
        ToolCallDelta(index=0, id="call_a", name="a", arguments=""),
        ToolCallDelta(index=1, id="call_b", name="b", arguments="{}"),
        ToolCallDelta(index=0, id=None, name=None, arguments="{}"),
        Finish(reason="tool_calls", upstream_request_id="chatcmpl-fake"),
    ]


async def test_it_reads_a_chat_completion_when_no_stream_was_asked(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(
        json_reply(chat_completion("Done.", usage_body=usage(5, 1)), headers={"x-request-id": "req_123"})
    )

    events = await collect(adapter(fake_upstream).stream(ask(stream=False)))

    assert fake_upstream.requests[0].json["stream"] is False
    assert events[0] == TextDelta("Done.")
    assert isinstance(events[1], UsageReport)
    assert events[2] == Finish(reason="stop", upstream_request_id="req_123")


async def test_it_reports_an_openai_style_error(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(
        error(404, openai_error("The model `gpt-test` does not exist", code="model_not_found"))
    )

    events = await collect(adapter(fake_upstream).stream(ask()))

    assert events == [
        UpstreamError(message="The model `gpt-test` does not exist", http_status=404, code="model_not_found")
    ]


async def test_it_falls_back_to_the_status_when_the_error_body_is_not_json(
    fake_upstream: FakeUpstream,
) -> None:
    fake_upstream.script(error(400, "<html>bad request</html>"))

    events = await collect(adapter(fake_upstream).stream(ask()))

    assert events == [UpstreamError(message="The upstream answered 400 Bad Request.", http_status=400)]


async def test_it_yields_each_chunk_as_soon_as_it_arrives(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(paced(5, every_ms=100))
    lags_ms: list[float] = []
    sent: list[int] = []

    async for event in adapter(fake_upstream).stream(ask()):
        if isinstance(event, TextDelta):
            sent.append(int(event.text.removeprefix("t=").removesuffix(";")))
            lags_ms.append((time.time_ns() - sent[-1]) / 1e6)

    assert len(sent) == 5
    assert all(later - earlier >= 80e6 for earlier, later in itertools.pairwise(sent))
    assert max(lags_ms) < 50


@pytest.mark.django_db
def test_it_builds_an_openai_adapter_from_a_connection(fake_upstream: FakeUpstream, actors: Any) -> None:
    connection = ProviderConnection.objects.create(
        team=actors.team,
        name="vLLM",
        kind=ConnectionKind.OPENAI_COMPATIBLE,
        base_url=fake_upstream.url + "/v1",
        token_ciphertext=token_encrypt(KEY),
    )

    events = asyncio.run(collect(adapter_for(connection).stream(ask())))

    sent = fake_upstream.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == fake_upstream.default_text


@pytest.mark.parametrize("line_end", ["\n", "\r\n", "\r"])
async def test_lines_and_characters_cut_between_reads_read_the_same(
    fake_upstream: FakeUpstream, line_end: str
) -> None:
    # Pieces of 7 bytes cut lines, the CR LF pair and the 2- and 4-byte characters between reads.
    words = ["Grüße ", "aus ", "Köln 🙂", " — ", "fin."]
    fake_upstream.script(
        sse(
            [*(openai_chunk(word) for word in words), usage_chunk(usage(3, 5))],
            line_end=line_end,
            cut=7,
        )
    )

    events = await collect(adapter(fake_upstream).stream(ask()))

    assert "".join(event.text for event in events if isinstance(event, TextDelta)) == "".join(words)
    assert isinstance(events[-1], Finish)
    assert not any(isinstance(event, UpstreamError) for event in events)
