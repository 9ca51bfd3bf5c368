"""The JSONL and CSV readers: every bad line kind is refused with its line number."""

from __future__ import annotations

import io
import json

import pytest

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
from playground.providers.kinds import ENGINE_PARAMETERS

GOOD = '{"messages": [{"role": "user", "content": "Hi"}], "external_reference": "a"}'


def _jsonl(text: str | bytes, shared: Shared | None = None) -> list[ItemInput | LineError]:
    stream = io.BytesIO(text) if isinstance(text, bytes) else utf8_lines(text)
    return list(jsonl_items(stream, InputRules(parameters=ENGINE_PARAMETERS, shared=shared)))


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
            "`temperature` must be a number",
        ),
        (
            '{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "x"}]}',
            "`tools` must be a list",
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


def test_it_refuses_a_line_that_is_not_utf8_and_names_it() -> None:
    results = _jsonl(GOOD.encode() + b"\n" + b'{"messages": "\xff"}\n')

    assert _errors(results) == [(2, "not UTF-8 text (byte 15).")]


def test_it_refuses_a_line_over_the_size_limit() -> None:
    big = json.dumps({"messages": [{"role": "user", "content": "x" * 1_000_001}]})

    ((number, text),) = _errors(_jsonl(big))
    assert number == 1 and "the limit is 1,000,000" in text


def test_it_stops_after_the_item_limit_and_says_so() -> None:
    lines = (f"{GOOD.replace('"a"', json.dumps(str(i)))}\n".encode() for i in range(MAX_ITEMS + 5))

    results = list(jsonl_items(lines, InputRules(parameters=ENGINE_PARAMETERS)))

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
    return list(
        csv_items(utf8_lines(text), template=template, rules=InputRules(parameters=ENGINE_PARAMETERS))
    )


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
            rules=InputRules(parameters=ENGINE_PARAMETERS),
        )
    )

    assert _errors(results) == [(3, "not UTF-8 text; save the CSV as UTF-8.")]
