"""Tool calls on both local models: grammar-valid arguments, parallel calls, streamed deltas, round trips."""

from __future__ import annotations

import json
from typing import Any, cast

import jsonschema
from cloudflare import Cloudflare
from cloudflare.types.ai.ai_run_params import MessagesMessage
from openai import OpenAI
from openai.types.chat import ChatCompletionMessageParam

from tests.engine.helpers import sse_payloads

CITY = {"type": "string", "minLength": 2, "maxLength": 24}
WEATHER = {
    "type": "object",
    "properties": {"city": CITY, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TIME = {"type": "object", "properties": {"city": CITY}, "required": ["city"], "additionalProperties": False}
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Current weather", "parameters": WEATHER},
    },
    {"type": "function", "function": {"name": "get_time", "description": "Local time", "parameters": TIME}},
]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASKED = "What is the weather in Paris and in London?"
# Each SDK types its messages its own way (OpenAI's roles are literals), so one list per SDK.
ASK: list[MessagesMessage] = [{"role": "user", "content": ASKED}]
OA_ASK: list[ChatCompletionMessageParam] = [{"role": "user", "content": ASKED}]


def _check_call(name: str, arguments: str) -> None:
    jsonschema.validate(json.loads(arguments), SCHEMAS[name])


def test_it_round_trips_a_tool_call(cf: Cloudflare, each_model: str) -> None:
    affinity = {"x-session-affinity": "ses_tool_round_trip"}
    first: Any = cf.ai.run(
        each_model,
        account_id="test",
        messages=ASK,
        tools=TOOLS,
        max_tokens=48,
        temperature=0,
        extra_body={"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
        extra_headers=affinity,
    )
    choice = first["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    [call] = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    _check_call("get_weather", call["function"]["arguments"])

    history = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": '{"temperature": 18, "sky": "sunny"}'},
    ]
    second: Any = cf.ai.run(
        each_model,
        account_id="test",
        # Cloudflare's message type knows no tool calls; the engine takes OpenAI's tool turns.
        messages=cast("list[MessagesMessage]", history),
        tools=TOOLS,
        max_tokens=12,
        temperature=0,
        extra_body={"tool_choice": "none"},
        extra_headers=affinity,
    )

    answer = second["choices"][0]
    assert answer["finish_reason"] in ("stop", "length")
    assert "tool_calls" not in answer["message"]
    assert answer["message"]["content"].strip()
    # The tool result is part of the prompt, which continues the first turn's cached prefix.
    assert (
        second["usage"]["prompt_tokens"]
        > first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"]
    )
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] >= first["usage"]["prompt_tokens"]


def test_it_returns_parallel_tool_calls_with_unique_ids(oa: OpenAI, each_model: str) -> None:
    completion = oa.chat.completions.create(
        model=each_model,
        messages=OA_ASK,
        tools=TOOLS,
        tool_choice="required",
        max_tokens=64,
        temperature=0,
    )

    choice = completion.choices[0]
    calls = choice.message.tool_calls or []
    assert choice.finish_reason == "tool_calls"
    assert len(calls) >= 2
    assert len({call.id for call in calls}) == len(calls)
    for call in calls:
        _check_call(call.function.name, call.function.arguments)  # type: ignore[union-attr]


def test_it_makes_a_single_call_when_parallel_calls_are_off(oa: OpenAI, each_model: str) -> None:
    completion = oa.chat.completions.create(
        model=each_model,
        messages=OA_ASK,
        tools=TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=64,
        temperature=0,
    )

    assert len(completion.choices[0].message.tool_calls or []) == 1
    assert completion.choices[0].finish_reason == "tool_calls"


def test_it_streams_tool_calls_as_openai_deltas(oa: OpenAI, each_model: str) -> None:
    stream = oa.chat.completions.create(
        model=each_model,
        messages=OA_ASK,
        tools=TOOLS,
        tool_choice="required",
        max_tokens=64,
        temperature=0,
        stream=True,
    )
    calls: dict[int, dict[str, str]] = {}
    finish_reasons = []
    for chunk in stream:
        choice = chunk.choices[0]
        finish_reasons.append(choice.finish_reason)
        for delta in choice.delta.tool_calls or []:
            if delta.index not in calls:  # the first chunk for an index carries its id and name
                assert delta.id and delta.function and delta.function.name
                calls[delta.index] = {"id": delta.id, "name": delta.function.name, "arguments": ""}
            calls[delta.index]["arguments"] += (delta.function and delta.function.arguments) or ""

    assert finish_reasons[-1] == "tool_calls"
    assert len(calls) >= 2 and sorted(calls) == list(range(len(calls)))
    for call in calls.values():
        _check_call(call["name"], call["arguments"])


def test_it_streams_tool_calls_on_the_native_route(cf: Cloudflare, each_model: str) -> None:
    with cf.ai.with_streaming_response.run(
        each_model,
        account_id="test",
        messages=ASK,
        tools=TOOLS,
        max_tokens=64,
        temperature=0,
        stream=True,
        extra_body={"tool_choice": "required", "parallel_tool_calls": False},
    ) as response:
        payloads = sse_payloads(response.iter_lines())

    deltas = [d for p in payloads[:-2] for d in p["choices"][0]["delta"].get("tool_calls", [])]
    assert deltas[0]["id"].startswith("call_") and deltas[0]["function"]["arguments"] == ""
    _check_call(deltas[0]["function"]["name"], "".join(d["function"]["arguments"] for d in deltas))
    assert payloads[-3]["choices"][0]["finish_reason"] == "tool_calls"
