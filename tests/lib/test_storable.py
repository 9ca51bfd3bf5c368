"""Upstream JSON made storable: the quick decoding of clean text gives what the full walk gives."""

from __future__ import annotations

import json

import pytest

from playground.lib.storable import REPLACEMENT_CHARACTER, storable_json, storable_json_loads

HOSTILE = [
    '{"choices": [{"delta": {"content": "plain text, caf\\u00e9, \\ud83d\\ude00"}}]}',  # clean escapes
    '{"a": "\\ud800 lone", "\\udfff": "key", "b": "nul \\u0000 here"}',
    '{"a": "a raw \ud800 surrogate"}',
    '{"figures": [NaN, Infinity, -Infinity, 1e999, -1e999, 1.5, 2, 12345678901234567890]}',
    '{"huge": ' + "9" * 400 + ".0}",  # no exponent, still too large for a float
    '{"text": "an escaped backslash then u: \\\\ud800 is text"}',
    '["\\uD800", "\\uDBFF\\uDFFF"]',
]


@pytest.mark.parametrize("raw", HOSTILE)
def test_it_decodes_what_the_full_walk_decodes(raw: str) -> None:
    assert storable_json_loads(raw) == storable_json(json.loads(raw))
    assert storable_json_loads(raw.encode("utf-8", "surrogatepass")) == storable_json(json.loads(raw))


def test_unstorable_strings_and_numbers_come_out_storable() -> None:
    value = storable_json_loads('{"a\\u0000": ["\\ud800", NaN, 1e999, -Infinity]}')

    assert value == {f"a{REPLACEMENT_CHARACTER}": [REPLACEMENT_CHARACTER, "NaN", "Infinity", "-Infinity"]}


@pytest.mark.parametrize("raw", ["", "{", "data: {}", '{"a": 1} trailing'])
def test_what_is_not_json_is_a_value_error(raw: str) -> None:
    with pytest.raises(ValueError):
        storable_json_loads(raw)
