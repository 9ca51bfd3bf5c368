"""The JSONL and CSV readers: every bad line kind is refused with its line number, and every
parameter is held to the rules the chat composer enforces for the connection kind and model."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.utils import timezone

from playground.batches.inputs import (
    MAX_ITEMS,
    InputRules,
    ItemInput,
    LineError,
    Shared,
    csv_items,
    jsonl_items,
    utf8_lines,
)
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.providers.kinds import ConnectionKind, kind_spec
from playground.providers.models import ProviderConnection
from playground.providers.request_rules import request_capabilities

pytestmark = pytest.mark.usefixtures("catalogue")

GOOD = '{"messages": [{"role": "user", "content": "Hi"}], "external_reference": "a"}'


def _rules(
    shared: Shared | None = None, *, kind: str = ConnectionKind.ENGINE, model: str = ENGINE_MODEL_ID
) -> InputRules:
    connection = ProviderConnection(kind=kind)  # never tested: the catalogue's window
    caps = request_capabilities(connection=connection, model_id=model, day=timezone.now().date())
    return InputRules(parameters=kind_spec(kind).parameters, caps=caps, shared=shared)


def _jsonl(text: str | bytes, shared: Shared | None = None, **on: Any) -> list[ItemInput | LineError]:
    stream = io.BytesIO(text) if isinstance(text, bytes) else utf8_lines(text)
    return list(jsonl_items(stream, _rules(shared, **on)))


def _errors(results: list[ItemInput | LineError]) -> list[tuple[int, str]]:
    return [(result.line, result.message) for result in results if isinstance(result, LineError)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"messages": [{"role": "user", "content": NaN}]}', "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got a list"),
        ('{"max_tokens": 5}', "`messages` is missing"),
        ('{"messages": []}', "`messages` must be a non-empty list"),
        ('{"messages": [{"role": "wizard", "content": "x"}]}', "has role 'wizard'"),
        ('{"messages": [{"role": "user", "content": 5}]}', "content must be text"),
        ('{"messages": [{"role": "user", "content": "x"}], "banana": 1}', "unknown field `banana`"),
        (
            '{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}',
            "`max_tokens` must be a whole number",
        ),
        (
            '{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}',
            "`temperature` must be a number from 0 to 2; got 'hot'.",
        ),
        (
            '{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "x"}]}',
            '`tools[0].type`: Must be "function".',
        ),
        (
            '{"messages": [{"role": "user", "content": "x"}], "model": "m"}',
            "`model` is chosen for the whole batch",
        ),
        ('{"messages": [{"role": "user", "content": "x"}], "stream": true}', "cannot stream"),
        ('{"messages": [{"role": "user", "content": "x"}], "external_reference": 7}', "must be a string"),
        ('{"messages": [{"role": "user", "content": "\\ud800"}]}', "cannot be stored"),
        (GOOD, "used by an earlier line"),
    ],
)
def test_it_refuses_each_bad_line_kind_with_its_line_number(line: str, message: str) -> None:
    # A good line, a blank line (still counted), then the bad one on line 3.
    results = _jsonl(f"{GOOD}\n\n{line}\n")

    assert len(_errors(results)) == 1
    number, text = _errors(results)[0]
    assert number == 3
    assert message in text


WORKERS = ConnectionKind.WORKERS_AI
GPT_OSS = "@cf/openai/gpt-oss-20b"  # reasons (effort, no switch), takes tools, no JSON schema
LLAMA = "@cf/meta/llama-3.3-70b-instruct-fp8-fast"  # does not reason; 24,000-token window
NO_TOOLS = "@cf/google/gemma-4-26b-a4b-it"
WEATHER = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}


def _line(**fields: Any) -> str:
    return json.dumps({"messages": [{"role": "user", "content": "x"}], **fields})


@pytest.mark.parametrize(
    ("fields", "kind", "model", "message"),
    [
        ({"temperature": 5}, "engine", ENGINE_MODEL_ID, "`temperature` must be a number from 0 to 2; got 5."),
        ({"top_p": 1.5}, "engine", ENGINE_MODEL_ID, "`top_p` must be a number from 0 to 1; got 1.5."),
        ({"seed": -1}, "engine", ENGINE_MODEL_ID, "`seed` must be a whole number from 0 to 4,294,967,295"),
        ({"max_tokens": 2.5}, "engine", ENGINE_MODEL_ID, "`max_tokens` must be a whole number from 1"),
        ({"max_tokens": 40_000}, "engine", ENGINE_MODEL_ID, "at most 8,192: the model's context window"),
        ({"max_tokens": 30_000}, WORKERS, LLAMA, "at most 24,000: the model's context window"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "engine", ENGINE_MODEL_ID, "`stop` has 5 sequences; at most 4"),
        ({"stop": ""}, "engine", ENGINE_MODEL_ID, "`stop` must be non-empty text"),
        ({"presence_penalty": 0.5}, "engine", ENGINE_MODEL_ID, "unknown field `presence_penalty`"),
        ({"frequency_penalty": -3}, WORKERS, GPT_OSS, "`frequency_penalty` must be a number from -2 to 2"),
        ({"reasoning_effort": "high"}, WORKERS, LLAMA, "Llama 3.3 70B fp8 fast does not reason."),
        (
            {"reasoning_effort": "max"},
            WORKERS,
            GPT_OSS,
            "`reasoning_effort` must be one of low, medium, high",
        ),
        ({"chat_template_kwargs": {"thinking": True}}, WORKERS, GPT_OSS, "has no thinking switch"),
        ({"tools": [WEATHER]}, WORKERS, NO_TOOLS, "does not support tool calling"),
        (
            {"tools": [{**WEATHER, "function": {"name": "w", "parameters": {"type": "string"}}}]},
            "engine",
            ENGINE_MODEL_ID,
            "`tools[0].function.parameters.type`: Tool parameters must describe an object",
        ),
        (
            {"tools": [{**WEATHER, "function": {"name": "w", "parameters": {"type": "objekt"}}}]},
            "engine",
            ENGINE_MODEL_ID,
            "Not valid JSON Schema 2020-12",
        ),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "clock"}}},
            "engine",
            ENGINE_MODEL_ID,
            "`tool_choice` names 'clock', which is not in `tools`.",
        ),
        ({"tool_choice": "required"}, "engine", ENGINE_MODEL_ID, '`tool_choice` "required" needs `tools`.'),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {}}}},
            WORKERS,
            GPT_OSS,
            "GPT-OSS 20B cannot follow a JSON schema",
        ),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": 7}}}},
            "engine",
            ENGINE_MODEL_ID,
            "`response_format.json_schema.schema.type`: Not valid JSON Schema 2020-12",
        ),
    ],
)
def test_it_holds_each_parameter_to_the_composers_rules_for_the_kind_and_model(
    fields: dict[str, Any], kind: str, model: str, message: str
) -> None:
    ((number, text),) = _errors(_jsonl(f"{GOOD}\n{_line(**fields)}\n", kind=kind, model=model))

    assert number == 2
    assert message in text


def test_one_out_of_range_line_is_refused_by_its_number_and_the_others_pass() -> None:
    lines = [_line(temperature=0.2)] * 3 + [_line(temperature=5), _line(temperature=2)]

    results = _jsonl("\n".join(lines))

    assert _errors(results) == [(4, "`temperature` must be a number from 0 to 2; got 5.")]
    assert sum(isinstance(result, ItemInput) for result in results) == 4


def test_what_the_composer_allows_passes_with_every_parameter_set() -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}}
    kimi = _line(
        temperature=2,
        top_p=0,
        max_tokens=256_000,
        seed=4_294_967_295,
        stop=["END"],
        presence_penalty=-2,
        frequency_penalty=2,
        reasoning_effort="low",
        chat_template_kwargs={"enable_thinking": False},
        response_format=schema,
    )
    tools = _line(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "weather"}})

    assert _errors(_jsonl(f"{kimi}\n{tools}\n", kind=WORKERS, model="@cf/moonshotai/kimi-k2.5")) == []


def test_shared_settings_are_held_to_the_same_rules() -> None:
    results = _jsonl(GOOD, Shared(fields={"temperature": 9}))

    assert _errors(results) == [(1, "`temperature` must be a number from 0 to 2; got 9.")]


def test_it_refuses_a_line_that_is_not_utf8_and_names_it() -> None:
    results = _jsonl(GOOD.encode() + b"\n" + b'{"messages": "\xff"}\n')

    assert _errors(results) == [(2, "not UTF-8 text (byte 15).")]


def test_it_refuses_a_line_over_the_size_limit() -> None:
    big = json.dumps({"messages": [{"role": "user", "content": "x" * 1_000_001}]})

    ((number, text),) = _errors(_jsonl(big))
    assert number == 1 and "the limit is 1,000,000" in text


def test_it_stops_after_the_item_limit_and_says_so() -> None:
    lines = (f"{GOOD.replace('"a"', json.dumps(str(i)))}\n".encode() for i in range(MAX_ITEMS + 5))

    results = list(jsonl_items(lines, _rules()))

    assert len(results) == MAX_ITEMS + 1
    assert isinstance(results[-1], LineError) and results[-1].line == MAX_ITEMS + 1
    assert "more than 50,000 items" in results[-1].message


def test_it_reads_crlf_a_bom_prompts_and_applies_shared_settings() -> None:
    text = "\ufeff" + GOOD + "\r\n" + '{"prompt": "Tell me", "temperature": 0.5}\r\n'

    results = _jsonl(text, Shared(system_prompt="Be brief.", fields={"temperature": 0.1, "max_tokens": 9}))

    first, second = results
    assert isinstance(first, ItemInput) and isinstance(second, ItemInput)
    assert first.external_reference == "a"
    assert first.body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert second.body["messages"][-1] == {"role": "user", "content": "Tell me"}
    assert second.body["temperature"] == 0.5  # the line's own setting wins
    assert second.body["max_tokens"] == 9


def _csv(text: str, template: str) -> list[ItemInput | LineError]:
    return list(csv_items(utf8_lines(text), template=template, rules=_rules()))


def test_it_fills_the_template_from_each_csv_row() -> None:
    results = _csv('name,text,external_reference\nAda,"two\nlines",r1\nBob,hi,r2\n', "{{{name}}}: {text}")

    assert [r.body["messages"][0]["content"] for r in results if isinstance(r, ItemInput)] == [
        "{Ada}: two\nlines",
        "{Bob}: hi",
    ]
    assert [r.line for r in results] == [2, 4]  # the quoted cell spans lines 2-3
    assert [r.external_reference for r in results if isinstance(r, ItemInput)] == ["r1", "r2"]


def test_it_refuses_a_template_naming_a_missing_column() -> None:
    assert _errors(_csv("name\nAda\n", "Hello {nme}")) == [
        (0, "The template uses {nme}, which the CSV header does not have (its columns: name).")
    ]


@pytest.mark.parametrize(
    ("csv_text", "line", "message"),
    [
        ("name,text\nAda,hi\nBob\n", 3, "the row has 1 fields; the header has 2."),
        ("name,text\nAda,hi\nBob,\n", 3, "column `text` is empty; the template needs it."),
        ("name,text\nAda,hi\nBob,\x00x\n", 3, "cannot be stored"),
    ],
)
def test_it_refuses_each_bad_csv_row_with_its_line_number(csv_text: str, line: int, message: str) -> None:
    ((number, text),) = _errors(_csv(csv_text, "{name} says {text}"))
    assert number == line
    assert message in text


def test_it_refuses_a_csv_that_is_not_utf8() -> None:
    results = list(
        csv_items(
            io.BytesIO(b"name\nAda\n\xff\xfe\n"),
            template="{name}",
            rules=_rules(),
        )
    )

    assert _errors(results) == [(3, "not UTF-8 text; save the CSV as UTF-8.")]
