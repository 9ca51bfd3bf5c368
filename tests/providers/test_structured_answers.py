"""The one check of an answer against the JSON response format its request asked for."""

from __future__ import annotations

from typing import Any

from playground.providers.structured_answers import (
    AnswerFormat,
    answer_check,
    answer_format,
    structured_check,
)

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}


def person_format() -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": PERSON}}


def test_an_answer_is_validated_against_the_schema_with_each_error_at_its_path() -> None:
    schema_format = person_format()

    assert structured_check(text='{"name": "Ada", "age": 36}', response_format=schema_format) == {
        "valid": True,
        "errors": [],
    }
    assert structured_check(text='{"name": 3, "age": -1}', response_format=schema_format) == {
        "valid": False,
        "errors": [
            {"path": "$.age", "message": "-1 is less than the minimum of 0"},
            {"path": "$.name", "message": "3 is not of type 'string'"},
        ],
    }
    assert structured_check(text="Sure! Here", response_format={"type": "json_object"}) == {
        "valid": False,
        "errors": [{"path": "$", "message": "Not valid JSON: Expecting value at line 1, column 1."}],
    }
    array_check = structured_check(text="[1]", response_format={"type": "json_object"})
    assert array_check is not None and array_check["errors"][0]["path"] == "$"
    assert structured_check(text="hello", response_format=None) is None


def test_the_format_is_read_from_the_openai_envelope_a_bare_schema_or_json_object() -> None:
    assert answer_format(person_format()) == AnswerFormat(name="person", schema=PERSON)
    assert answer_format({"type": "json_schema", "json_schema": PERSON}) == AnswerFormat(
        name="", schema=PERSON
    )
    assert answer_format({"type": "json_object"}) == AnswerFormat(
        name="json_object", schema={"type": "object"}
    )
    for text_like in (None, {"type": "text"}, {"type": "xml"}, "json_schema"):
        assert answer_format(text_like) is None


def test_a_nested_error_is_named_by_its_json_path_and_a_valid_answer_has_none() -> None:
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "object", "required": ["sku"]}}},
    }
    asked = AnswerFormat(name="order", schema=schema)

    check = answer_check(text='{"items": [{"sku": "a"}, {"qty": 2}]}', answer_format=asked)
    assert check is not None and not check.valid
    assert [(issue.path, issue.message) for issue in check.issues] == [
        ("$.items[1]", "'sku' is a required property")
    ]
    valid = answer_check(text='{"items": [{"sku": "a"}]}', answer_format=asked)
    assert valid is not None and valid.valid and valid.issues == ()


def test_an_answer_that_is_not_json_fails_at_the_root_and_an_empty_one_is_not_judged() -> None:
    asked = answer_format({"type": "json_object"})
    assert asked is not None

    check = answer_check(text='{"a": 1', answer_format=asked)
    assert check is not None and not check.valid
    assert check.issues[0].path == "$" and check.issues[0].message.startswith("Not valid JSON")
    assert answer_check(text=" \n", answer_format=asked) is None
    nested = answer_check(text="[" * 100_000, answer_format=asked)
    assert nested is not None and not nested.valid


def test_a_schema_that_cannot_be_applied_is_an_error_at_the_root_not_a_crash() -> None:
    asked = AnswerFormat(name="remote", schema={"$ref": "https://example.com/schema.json"})

    check = answer_check(text="{}", answer_format=asked)

    assert check is not None and not check.valid
    assert check.issues[0].path == "$" and "could not be applied" in check.issues[0].message
