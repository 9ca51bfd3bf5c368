"""JSON text made readable for the exports: escapes of printable characters undone, nothing else."""

from __future__ import annotations

import json

import pytest

from playground.analytics.json_text import json_text_readable

VALUES = [
    {"note": "naïve ☃ 日本語 🎉"},
    {"é": ["\u2028", "\u007f", "\ufeff"]},
    {"kept": 'a \\u00e9 \\\\u00e9 " \\ \u0001 \n \t \u001f'},
    {"pair": "\U0001f389", "numbers": [1e-07, 12345678901234567890, -0.5]},
    {},
]


@pytest.mark.parametrize("value", VALUES)
def test_the_text_reads_back_as_the_same_value_with_no_escape_of_a_printable_character(value: object) -> None:
    escaped = json.dumps(value)  # as SQLite holds it: every non-ASCII character escaped

    readable = json_text_readable(escaped)

    assert json.loads(readable) == value
    assert readable == json.dumps(value, ensure_ascii=False)  # as PostgreSQL writes it
    assert json_text_readable(readable) == readable  # a no-op on text without such escapes


def test_control_characters_quotes_backslashes_and_lone_surrogates_stay_escaped() -> None:
    text = '["\\u0001", "\\u0022", "\\u005c", "\\ud800", "\\udc00x", "\\u0041\\udc00", "\\\\u0041"]'

    assert json_text_readable(text) == (
        '["\\u0001", "\\u0022", "\\u005c", "\\ud800", "\\udc00x", "A\\udc00", "\\\\u0041"]'
    )
