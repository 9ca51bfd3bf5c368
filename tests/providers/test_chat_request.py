"""`ChatRequest.prompt_chars`: everything the model reads counts toward the prompt estimate
(the context-window check, the budget reservation, usage when a provider sends none)."""

from __future__ import annotations

import json
from typing import Any

from playground.providers.adapters import ChatRequest

WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "answer", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
}
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris?"}]


def test_tool_definitions_count_as_the_json_sent() -> None:
    plain = ChatRequest(model="m", messages=MESSAGES)
    with_tools = ChatRequest(model="m", messages=MESSAGES, tools=[WEATHER])

    assert plain.prompt_chars == len("Weather in Paris?")
    assert with_tools.prompt_chars == plain.prompt_chars + len(json.dumps([WEATHER]))


def test_assistant_tool_calls_count_their_names_and_arguments() -> None:
    arguments = json.dumps({"city": "Paris", "unit": "celsius"})
    messages: list[dict[str, Any]] = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "12 °C"},
        # A wire that sends the arguments as an object still counts them.
        {
            "role": "assistant",
            "tool_calls": [{"function": {"name": "weather", "arguments": {"city": "Lyon"}}}],
        },
    ]

    chars = ChatRequest(model="m", messages=messages).prompt_chars

    expected = len("Weather in Paris?") + len("weather") + len(arguments) + len("12 °C")
    assert chars == expected + len("weather") + len(json.dumps({"city": "Lyon"}))


def test_the_response_format_schema_counts() -> None:
    plain = ChatRequest(model="m", messages=MESSAGES)
    structured = ChatRequest(model="m", messages=MESSAGES, response_format=SCHEMA)

    assert structured.prompt_chars == plain.prompt_chars + len(json.dumps(SCHEMA))
    assert structured.prompt_chars - plain.prompt_chars > len(json.dumps(SCHEMA["json_schema"]["schema"]))
