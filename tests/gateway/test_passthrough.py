"""What the client receives is what the upstream sent, byte for byte, and the meter reads the same bytes."""

from __future__ import annotations

import json
from decimal import Decimal

import httpx

from tests.fakes.upstream import FakeUpstream, json_reply, sse
from tests.gateway.conftest import KIMI, IssuedKey, records_written
from tests.support.browser import LiveApp

# A Kimi stream as Workers AI's OpenAI-compatible route sends it: reasoning first, then text,
# then a tool call in pieces; fields in Kimi's order, spacing as sent (never re-serialized).
HEAD = (
    '{"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1764000000,'
    '"model":"@cf/moonshotai/kimi-k2.5"'
)
RECORDED = [
    HEAD
    + ',"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":"The user"}}]}',
    HEAD + ',"choices":[{"index":0,"delta":{"reasoning_content":" wants Oslo\'s weather."}}]}',
    HEAD + ',"choices":[{"index":0,"delta":{"content":"Checking \\u00e9t\\u00e9 "}}]}',
    HEAD + ',"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"functions.get_weather:0",'
    '"type":"function","function":{"name":"get_weather","arguments":""}}]}}]}',
    HEAD + ',"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":'
    '{"arguments":"{\\"city\\": \\"Oslo\\"}"}}]}}]}',
    HEAD + ',"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
    HEAD + ',"choices":[],"usage":{"prompt_tokens":2400,"completion_tokens":35,"total_tokens":2435,'
    '"prompt_tokens_details":{"cached_tokens":2048}}}',
]
K26 = {"input": Decimal("0.95"), "cached": Decimal("0.16"), "output": Decimal("4.00")}  # per million, today


def _wire(frames: list[str]) -> bytes:
    return b"".join(f"data: {frame}\n\n".encode() for frame in [*frames, "[DONE]"])


def _stream(gateway: LiveApp, key: IssuedKey, body: dict[str, object]) -> bytes:
    with httpx.stream(
        "POST", gateway.url + "/v1/chat/completions", json=body, headers=key.headers
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return response.read()


def test_a_recorded_stream_reaches_the_client_unchanged_but_for_the_usage_chunk_it_did_not_ask_for(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(sse(RECORDED))
    body = {"model": KIMI, "messages": [{"role": "user", "content": "Weather in Oslo?"}], "stream": True}
    received = _stream(gateway, gateway_key, body)

    assert received == _wire(RECORDED[:-1])
    (record,) = records_written(1)
    assert (record.prompt_tokens, record.cached_tokens, record.completion_tokens) == (2400, 2048, 35)
    by_hand = ((2400 - 2048) * K26["input"] + 2048 * K26["cached"] + 35 * K26["output"]) / 1_000_000
    assert record.total_cost == by_hand == Decimal("0.00080208")
    assert record.request_body is not None and record.request_body["stream_options"] == {
        "include_usage": True
    }


def test_a_client_that_asks_for_usage_gets_every_byte(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(sse(RECORDED))
    body = {
        "model": KIMI,
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert _stream(gateway, gateway_key, body) == _wire(RECORDED)
    assert records_written(1)[0].cached_tokens == 2048


def test_a_non_streamed_answer_is_the_upstreams_body_and_status(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    raw = (
        '{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",'
        '"content":"Hi","reasoning_content":"short"},"finish_reason":"stop"}],'
        '"usage":{"prompt_tokens":7,"completion_tokens":1,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":0}}}'
    )

    fake_upstream.script(json_reply(raw, status=200))
    response = httpx.post(
        gateway.url + "/v1/chat/completions",
        json={"model": KIMI, "messages": [{"role": "user", "content": "x"}]},
        headers=gateway_key.headers,
    )
    assert response.status_code == 200
    assert response.content == raw.encode()
    assert json.loads(response.content)["choices"][0]["message"]["reasoning_content"] == "short"
    (record,) = records_written(1)
    assert (record.prompt_tokens, record.cached_tokens, record.completion_tokens) == (7, 0, 1)
