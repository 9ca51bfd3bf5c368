"""Closing a JSON answer cut short, from the parse state of the text emitted so far."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from playground.engine.json_closer import JsonCloser, JsonStateError, smallest_json

PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 16},
        "age": {"type": "integer", "minimum": 18},
        "pet": {"type": "string", "enum": ["cat", "dog", "none"]},
        "nickname": {"type": "string"},
        "scores": {"type": "array", "items": {"type": "array", "items": {"type": "number"}, "minItems": 1}},
    },
    "required": ["name", "age", "pet"],
    "additionalProperties": False,
}


def closed(schema: dict[str, Any] | None, text: str) -> str:
    closer = JsonCloser(schema)
    closer.feed(text)
    return text + closer.closing()


def test_it_ends_a_cut_escape_inside_a_string() -> None:
    assert closed(PERSON, '{"name":"Al\\') == '{"name":"Al\\\\","age":18,"pet":"cat"}'
    assert json.loads(closed(PERSON, '{"name":"Al\\u00'))["name"] == "Al "
    assert json.loads(closed(PERSON, '{"name":"Al\\u00e'))["name"] == "Al\u00e0"


def test_it_gives_a_key_with_no_value_the_smallest_value_its_schema_allows() -> None:
    assert closed(PERSON, '{"name"') == '{"name":"……","age":18,"pet":"cat"}'
    assert closed(PERSON, '{"name":"Ann","age":') == '{"name":"Ann","age":18,"pet":"cat"}'


def test_it_completes_a_cut_key_to_the_property_it_started() -> None:
    assert closed(PERSON, '{"name":"Ann","a') == '{"name":"Ann","age":18,"pet":"cat"}'


def test_it_ends_a_cut_number_with_a_digit() -> None:
    assert closed(PERSON, '{"name":"Ann","age":2') == '{"name":"Ann","age":2,"pet":"cat"}'
    assert closed({"type": "number"}, "12.") == "12.0"
    assert closed({"type": "number"}, "-") == "-0"
    assert closed({"type": "number"}, "1e+") == "1e+0"
    assert closed({"type": "array", "items": {"type": "number"}}, "[1.5,2E") == "[1.5,2E0]"


def test_it_closes_nested_arrays_keeping_each_ones_minimum_items() -> None:
    start = '{"name":"Ann","age":30,"pet":"dog","scores":[[1,2],['
    assert closed(PERSON, start) == start + "0]]}"
    assert closed(PERSON, start + "3,") == start + "3,0]]}"
    assert closed({"type": "array", "items": {"type": "array"}}, "[[[1,[") == "[[[1,[]]]]"


def test_it_completes_a_cut_enum_value_to_the_member_it_started() -> None:
    assert closed(PERSON, '{"name":"Ann","age":30,"pet":"d') == '{"name":"Ann","age":30,"pet":"dog"}'


def test_it_pads_a_string_shorter_than_its_min_length() -> None:
    assert closed(PERSON, '{"name":"A') == '{"name":"A…","age":18,"pet":"cat"}'


def test_it_follows_a_comma_with_the_next_property_the_grammar_allows() -> None:
    text = '{"name":"Ann","age":30,"pet":"cat",'
    assert closed(PERSON, text) == text + '"nickname":""}'
    text = '{"name":"Ann","age":30,"pet":"cat","nickname":"Jo",'
    assert closed(PERSON, text) == text + '"scores":[]}'


def test_it_closes_any_json_when_the_schema_is_only_an_object() -> None:
    text = '{"a":[1,{"b":"x\\"y'
    assert closed({"type": "object"}, text) == text + '"}]}'
    assert closed({"type": "object"}, '{"a":1,') == '{"a":1,"":null}'
    assert closed({"type": "object"}, '{"a":tr') == '{"a":true}'


def test_it_follows_refs_and_the_union_branch_that_was_opened() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"item": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/box"}]}},
        "required": ["item"],
        "$defs": {
            "box": {"type": "object", "properties": {"size": {"enum": ["S", "XL"]}}, "required": ["size"]}
        },
    }
    assert closed(schema, "") == '{"item":0}'
    assert closed(schema, '{"item":{') == '{"item":{"size":"S"}}'
    assert closed(schema, '{"item":{"size":"X') == '{"item":{"size":"XL"}}'


# A cut number keeps the digits it has, so a bound like PERSON's age minimum may not hold yet.
ANY_AGE = {**PERSON, "properties": {**PERSON["properties"], "age": {"type": "integer"}}}
DOCUMENTS = [
    (ANY_AGE, '{"name":"Zo\\u00eb \\"Z\\"","age":42,"pet":"none","nickname":"z","scores":[[1.5,-2e-3],[0]]}'),
    ({"type": "object"}, '{"a":[true,false,null,{"b":[]}],"c\\n":-0.5E+2,"d":{}}'),
    ({"type": "array", "items": {"type": "string"}, "minItems": 3}, '["x","y\\t","\\u20ac"]'),
]


@pytest.mark.parametrize(("schema", "document"), DOCUMENTS)
def test_every_prefix_of_an_answer_closes_to_json_that_validates(
    schema: dict[str, Any], document: str
) -> None:
    for cut in range(len(document) + 1):
        text = closed(schema, document[:cut])
        jsonschema.validate(json.loads(text), schema)  # raises, naming the prefix in the traceback


def test_the_smallest_answer_of_a_schema_has_its_required_shape() -> None:
    assert smallest_json(PERSON, PERSON) == '{"name":"……","age":18,"pet":"cat"}'
    assert smallest_json({"type": "object"}, None) == "{}"
    assert smallest_json({"type": "array", "prefixItems": [{"type": "boolean"}, {"const": 3}]}, None) == (
        "[false,3]"
    )
    assert JsonCloser(PERSON).closing() == smallest_json(PERSON, PERSON)


def test_a_copy_reads_on_without_changing_the_original() -> None:
    closer = JsonCloser(PERSON)
    closer.feed('{"name":"Ann"')
    twin = closer.copy()
    twin.feed(',"age":3')

    assert closer.closing() == ',"age":18,"pet":"cat"}'
    assert twin.closing() == ',"pet":"cat"}'


def test_a_complete_answer_needs_no_closing_and_refuses_more_text() -> None:
    closer = JsonCloser(None)
    closer.feed('{"a":1} ')

    assert closer.done and closer.closing() == ""
    with pytest.raises(JsonStateError):
        closer.feed("{")
