"""The official SDKs pointed at the gateway, in front of the loopback upstream and of the real engine."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from cloudflare import Cloudflare
from openai import AsyncOpenAI, OpenAI
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
from openai.types.shared_params import ResponseFormatJSONSchema

from playground.usage.models import RequestPath, UsageStatus
from tests.fakes.upstream import FakeUpstream, openai_chunk, sse, usage, usage_chunk
from tests.gateway.conftest import KIMI, IssuedKey, records_written
from tests.support.browser import LiveApp
from tests.support.engine import EngineProcess

HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hello"}]
WEATHER: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CITY_SCHEMA: ResponseFormatJSONSchema = {
    "type": "json_schema",
    "json_schema": {
        "name": "city",
        "schema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
            "required": ["name", "population"],
        },
    },
}


def test_the_openai_sdk_streams_and_the_record_has_the_providers_tokens(
    oa: OpenAI, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(
        sse(
            [
                openai_chunk("Hel"),
                openai_chunk("lo"),
                openai_chunk(finish_reason="stop"),
                usage_chunk(usage(12, 2, cached=8)),
            ]
        )
    )
    stream = oa.chat.completions.create(model=KIMI, messages=HELLO, stream=True)
    chunks = list(stream)

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello"
    assert all(c.usage is None for c in chunks)  # not asked for: the usage-only chunk is not relayed
    sent = fake_upstream.requests[0]
    assert sent.path.endswith("/ai/v1/chat/completions")
    assert sent.json is not None and sent.json["stream_options"] == {"include_usage": True}
    (record,) = records_written(1)
    assert (record.path, record.status, record.api_key_id) == (
        RequestPath.GATEWAY,
        UsageStatus.OK,
        gateway_key.key.pk,
    )
    assert (record.prompt_tokens, record.cached_tokens, record.completion_tokens) == (12, 8, 2)
    assert record.usage_source == "provider"


def test_the_openai_sdk_gets_the_usage_chunk_when_it_asks(oa: OpenAI, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(
        sse([openai_chunk("Hi"), openai_chunk(finish_reason="stop"), usage_chunk(usage(5, 1, cached=0))])
    )
    chunks = list(
        oa.chat.completions.create(
            model=KIMI, messages=HELLO, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 5


def test_the_openai_sdk_non_streamed_answer_carries_the_record_id_and_cost(
    oa: OpenAI, fake_upstream: FakeUpstream
) -> None:
    raw = oa.chat.completions.with_raw_response.create(model=KIMI, messages=HELLO, max_tokens=20)
    completion = raw.parse()

    assert completion.choices[0].message.content
    (record,) = records_written(1)
    assert raw.headers["x-playground-request-id"] == str(record.request_id)
    assert raw.headers["x-playground-cost-usd"] == f"{record.total_cost:.10f}"
    assert record.total_cost > 0
    assert float(raw.headers["x-playground-overhead-ms"]) >= 0
    assert raw.headers["x-playground-attempts"] == "1"
    assert record.streamed is False


async def test_the_async_openai_sdk_streams_and_not(aoa: AsyncOpenAI, fake_upstream: FakeUpstream) -> None:
    whole = await aoa.chat.completions.create(model=KIMI, messages=HELLO)
    stream = await aoa.chat.completions.create(model=KIMI, messages=HELLO, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert whole.choices[0].message.content == text == fake_upstream.default_text
    assert len(await sync_to_async(records_written)(2)) == 2


def test_tools_and_json_schema_pass_as_sent(oa: OpenAI, fake_upstream: FakeUpstream) -> None:
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":'},
    }
    more = {"index": 0, "function": {"arguments": '"Oslo"}'}}
    fake_upstream.script(
        sse(
            [
                openai_chunk(tool_calls=[call]),
                openai_chunk(tool_calls=[more]),
                openai_chunk(finish_reason="tool_calls"),
                usage_chunk(usage(30, 9)),
            ]
        )
    )
    stream = oa.chat.completions.create(
        model=KIMI,
        messages=HELLO,
        tools=[WEATHER],
        tool_choice="auto",
        stream=True,
        temperature=0.2,
        top_p=0.9,
    )
    arguments = "".join(
        c.choices[0].delta.tool_calls[0].function.arguments or ""
        for c in stream
        if c.choices and c.choices[0].delta.tool_calls and c.choices[0].delta.tool_calls[0].function
    )
    oa.chat.completions.create(model=KIMI, messages=HELLO, response_format=CITY_SCHEMA)

    assert json.loads(arguments) == {"city": "Oslo"}
    first, second = (request.json for request in fake_upstream.requests)
    assert first is not None and second is not None
    assert first["tools"] == [WEATHER] and first["tool_choice"] == "auto"
    assert (first["temperature"], first["top_p"]) == (0.2, 0.9)
    assert second["response_format"] == CITY_SCHEMA
    assert records_written(2)[0].completion_tokens == 9


def test_the_cloudflare_sdk_runs_natively_with_the_affinity_header(
    cf: Cloudflare, fake_upstream: FakeUpstream
) -> None:
    result: Any = cf.ai.run(
        KIMI,
        account_id="not-trusted",
        messages=[{"role": "user", "content": "Say hello"}],
        extra_headers={"x-session-affinity": "ses-42"},
    )
    with cf.ai.with_streaming_response.run(
        KIMI, account_id="whatever", messages=[{"role": "user", "content": "Hi"}], stream=True
    ) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data:")]

    assert result["response"] == fake_upstream.default_text
    assert lines[-1] == "data: [DONE]"
    assert (
        json.loads(lines[-2].removeprefix("data: "))["usage"]["prompt_tokens"] == 10
    )  # Workers AI's own trailer
    first, _ = fake_upstream.requests
    assert (
        first.path == "/client/v4/accounts/0123456789abcdef0123456789abcdef/ai/run/@cf/moonshotai/kimi-k2.5"
    )
    assert first.headers["x-session-affinity"] == "ses-42"
    assert (
        first.headers["authorization"] == "Bearer cf-test-token-abcdef"
    )  # the connection's token, not the key
    records = records_written(2)
    assert [r.affinity_key for r in records] == ["ses-42", ""]
    assert [r.streamed for r in records] == [False, True]
    assert all(r.status == UsageStatus.OK and r.completion_tokens > 0 for r in records)


@pytest.mark.timeout(300)
def test_the_sdks_through_the_gateway_in_front_of_the_real_engine(
    gateway: LiveApp, engine_key: IssuedKey, running_engine: EngineProcess
) -> None:
    model = running_engine.model_id
    with (
        OpenAI(base_url=gateway.url + "/v1", api_key=engine_key.secret, max_retries=0) as oa,
        Cloudflare(base_url=gateway.url + "/client/v4", api_token=engine_key.secret, max_retries=0) as cf,
    ):
        listed = [m.id for m in oa.models.list()]
        whole = oa.chat.completions.create(model=model, messages=HELLO, max_tokens=8, temperature=0)
        streamed = "".join(
            c.choices[0].delta.content or ""
            for c in oa.chat.completions.create(
                model=model, messages=HELLO, max_tokens=8, temperature=0, stream=True
            )
            if c.choices
        )
        tool = oa.chat.completions.create(
            model=model, messages=HELLO, tools=[WEATHER], tool_choice="required", max_tokens=40, temperature=0
        )
        schema = oa.chat.completions.create(
            model=model,
            messages=HELLO,
            response_format=CITY_SCHEMA,
            max_tokens=60,
            temperature=0,
        )
        native: Any = cf.ai.run(
            model,
            account_id="ignored",
            messages=[{"role": "user", "content": "Say hello"}],
            max_tokens=8,
            temperature=0,
            extra_headers={"x-session-affinity": "engine-session"},
        )

    assert model in listed
    assert whole.choices[0].message.content == streamed  # greedy: the same answer either way
    calls = tool.choices[0].message.tool_calls
    assert calls and calls[0].function.name == "get_weather"  # type: ignore[union-attr]
    assert "city" in json.loads(calls[0].function.arguments)  # type: ignore[union-attr]
    content = schema.choices[0].message.content
    assert content is not None and {"name", "population"} <= json.loads(content).keys()
    assert native["choices"][0]["message"]["content"]
    records = records_written(5)
    assert len(records) == 5
    assert all(r.status == UsageStatus.OK and r.usage_source == "provider" for r in records)
    assert all(r.cached_tokens is not None for r in records)
    assert records[-1].affinity_key == "engine-session"
