"""Prompt variables (`presets.variables`): what is filled, what is refused, what stays as written."""

from __future__ import annotations

from typing import Any

import pytest

from playground.presets.variables import (
    Variable,
    VariablesUnfilled,
    messages_fill,
    placeholder_names,
    variables_declared,
    variables_problems,
)


def test_declared_placeholders_are_filled_in_system_user_and_assistant_text_but_not_tool_results() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You help {{customer}} ({{ seats }} seats)."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hi, I am {{customer}}"}, {"type": "image_url"}],
        },
        {"role": "assistant", "content": "Hello {{customer}}"},
        {"role": "tool", "tool_call_id": "1", "content": "{{customer}}"},
    ]
    variables = [Variable("customer", value="Ada"), Variable("seats", "number", " 12 ")]

    filled, used = messages_fill(messages, variables)

    assert filled[0]["content"] == "You help Ada (12 seats)."
    assert filled[1]["content"][0]["text"] == "Hi, I am Ada"
    assert filled[1]["content"][1] == {"type": "image_url"}
    assert filled[2]["content"] == "Hello Ada"
    assert filled[3]["content"] == "{{customer}}"
    assert used == {"customer": "Ada", "seats": "12"}
    assert messages[0]["content"] == "You help {{customer}} ({{ seats }} seats)."  # the input is not changed


def test_undeclared_and_escaped_placeholders_are_sent_as_written() -> None:
    messages = [{"role": "user", "content": "{{ jinja }} and \\{{customer}} and {{customer}}"}]

    filled, used = messages_fill(messages, [Variable("customer", value="Ada")])

    assert filled[0]["content"] == "{{ jinja }} and {{customer}} and Ada"
    assert used == {"customer": "Ada"}


def test_a_used_variable_without_a_value_or_with_a_value_its_type_refuses_is_named() -> None:
    messages = [{"role": "user", "content": "{{customer}} {{seats}} {{profile}}"}]
    variables = [
        Variable("customer"),
        Variable("seats", "number", "twelve"),
        Variable("profile", "json", "{"),
    ]

    with pytest.raises(VariablesUnfilled) as caught:
        messages_fill(messages, variables)

    assert caught.value.messages == [
        "Fill in {{customer}}: the prompt uses it and it has no value.",
        "{{seats}} is a number; 'twelve' is not one.",
        "{{profile}} is JSON, and its value does not parse: Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1).",
    ]


def test_an_unused_variable_without_a_value_does_not_stop_a_request() -> None:
    filled, used = messages_fill([{"role": "user", "content": "hi"}], [Variable("customer")])

    assert filled == [{"role": "user", "content": "hi"}] and used == {}


def test_a_new_placeholder_declares_a_text_variable_once_in_order_of_use() -> None:
    declared = variables_declared(
        [Variable("plan", "json", "{}")], ["{{customer}} on {{plan}}, {{customer}}"]
    )

    assert declared == [Variable("plan", "json", "{}"), Variable("customer")]
    assert placeholder_names(["\\{{escaped}} {{a}} {{b}} {{a}}"]) == ["a", "b"]


def test_declarations_are_checked_at_their_json_paths() -> None:
    rows = [
        {"name": "customer", "type": "text", "value": "Ada"},
        {"name": "customer", "type": "text"},
        {"name": "2nd", "type": "date", "value": 3, "extra": True},
    ]

    problems = [(issue.path, issue.message) for issue in variables_problems(rows, "$.variables")]

    assert problems == [
        ("$.variables[1].name", "'customer' is declared twice."),
        ("$.variables[2].extra", "Unknown field; a variable has name, type and value."),
        ("$.variables[2].name", "A name of letters, digits and _ (not first), at most 64."),
        ("$.variables[2].type", "One of text, number, json."),
        ("$.variables[2].value", "Must be text (a number or JSON is written as text)."),
    ]
    assert variables_problems({"customer": "Ada"}, "$.v")[0].message.startswith("Must be an array")
