"""Tools, tool_choice and response_format become a mode, a grammar and a system note."""

from __future__ import annotations

from typing import Any

import pytest

from playground.engine.errors import EngineError
from playground.engine.output import plan_output

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather",
        "parameters": {
            "type": "object",
            "properties": {"place": {"$ref": "#/$defs/Place"}},
            "required": ["place"],
            "$defs": {
                "Place": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
            },
        },
    },
}
CLOCK: dict[str, Any] = {
    "name": "clock",
    "description": "Local time",
    "parameters": {"type": "object"},
}  # legacy flat


def test_it_answers_free_text_without_tools_or_format() -> None:
    plan = plan_output({})

    assert plan.mode == "text" and plan.grammar is None and plan.system_note == ""


def test_it_lets_the_first_token_choose_between_text_and_calls_under_auto() -> None:
    plan = plan_output({"tools": [WEATHER, CLOCK]})

    assert plan.mode == "auto"
    assert plan.grammar is not None and plan.grammar.startswith("root ::= tool-calls | [^[] .*")
    assert set(plan.tool_schemas) == {"get_weather", "clock"}
    assert "get_weather: Current weather." in plan.system_note and "clock: Local time." in plan.system_note


def test_it_hoists_each_tools_definitions_so_their_refs_resolve() -> None:
    plan = plan_output({"tools": [WEATHER], "tool_choice": "required"})

    assert plan.mode == "tools"
    assert plan.grammar is not None and '"\\"city\\""' in plan.grammar
    assert 'space ::= ""' in plan.grammar  # compact JSON


def test_it_limits_a_named_choice_to_that_tool() -> None:
    plan = plan_output(
        {"tools": [WEATHER, CLOCK], "tool_choice": {"type": "function", "function": {"name": "clock"}}}
    )

    assert plan.mode == "tools" and set(plan.tool_schemas) == {"clock"}
    assert plan.grammar is not None and "get_weather" not in plan.grammar


def test_it_keeps_the_tool_note_but_no_grammar_when_tool_choice_is_none() -> None:
    plan = plan_output({"tools": [CLOCK], "tool_choice": "none"})

    assert plan.mode == "text" and plan.grammar is None and "clock" in plan.system_note


def test_it_accepts_the_legacy_bare_json_schema() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    plan = plan_output({"response_format": {"type": "json_schema", "json_schema": schema}})

    assert plan.mode == "json" and plan.response_schema == schema


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"tools": "all"}, "`tools` must be a list"),
        ({"tools": [{"type": "function", "function": {"name": "has space"}}]}, "name must be"),
        ({"tools": [CLOCK, CLOCK]}, "more than one tool"),
        ({"tools": [{"type": "custom", "custom": {"name": "x"}}]}, "other tool types"),
        ({"tools": [{"name": "f", "parameters": {"type": "array"}}]}, "must describe an object"),
        ({"tool_choice": "required"}, "needs `tools`"),
        ({"tools": [CLOCK], "tool_choice": "any"}, "`tool_choice` must be"),
        (
            {"tools": [CLOCK], "tool_choice": "required", "response_format": {"type": "json_object"}},
            "cannot be combined",
        ),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": 5}}}},
            "not a valid JSON Schema",
        ),
        (
            {
                "tools": [
                    {
                        "name": "f",
                        "parameters": {"type": "object", "properties": {"a": {"$ref": "http://x/y"}}},
                    }
                ]
            },
            "$ref",
        ),
    ],
)
def test_it_refuses_bad_tool_and_format_settings(body: dict[str, Any], words: str) -> None:
    with pytest.raises(EngineError) as caught:
        plan_output(body)

    assert caught.value.code == 8001 and caught.value.status == 400
    assert words in caught.value.message
