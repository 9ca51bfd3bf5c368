"""Whether an answer holds to the JSON response format its request asked for.

One check for every feature: the chat's badge on an answer (`structured_check`, stored on the
message) and the usage record's `schema_valid` (`usage.records`, for every path through the
metered call) read the same `answer_check`, so a conversation and the dashboard's conformance
table never disagree about an answer. Schemas are applied as JSON Schema 2020-12; remote `$ref`s
are never fetched.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaViolation

from playground.providers.json_problems import Issue, json_path
from playground.providers.request_rules import JSON_OBJECT, JSON_SCHEMA

MAX_ERRORS_SHOWN = 20
ANY_OBJECT: Mapping[str, Any] = {"type": "object"}


@dataclass(frozen=True)
class AnswerFormat:
    """What a JSON response format asks of an answer's text."""

    name: str  # the json_schema's name ("" for a bare schema, which has none), or "json_object"
    schema: Any  # a JSON Schema (an object, or true / false); json_object: any JSON object


@dataclass(frozen=True)
class AnswerCheck:
    valid: bool
    issues: tuple[Issue, ...]  # where and why it is not valid, shallowest path first

    def as_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "errors": [issue.as_dict() for issue in self.issues]}


def answer_format(response_format: Any) -> AnswerFormat | None:
    """The format a request's `response_format` asks for; None for text (or none at all)."""
    kind = response_format.get("type") if isinstance(response_format, Mapping) else None
    if kind == JSON_OBJECT:
        return AnswerFormat(name=JSON_OBJECT, schema=ANY_OBJECT)
    if kind != JSON_SCHEMA:
        return None
    spec = response_format.get("json_schema")
    spec = spec if isinstance(spec, Mapping) else {}
    if "schema" not in spec:  # Workers AI's legacy models take the schema bare, without a name
        return AnswerFormat(name="", schema=spec)
    name = spec.get("name")
    return AnswerFormat(name=name if isinstance(name, str) else "", schema=spec["schema"])


def answer_check(*, text: str, answer_format: AnswerFormat) -> AnswerCheck | None:
    """The whole answer's text against the format; None for an empty answer (nothing to check:
    a failed request, or an answer that was only tool calls)."""
    if not text.strip():
        return None
    value, problem = json_text_parse(text)
    if problem is not None:
        return AnswerCheck(valid=False, issues=(problem,))
    try:
        issues = violations(Draft202012Validator(answer_format.schema).iter_errors(value))
    except Exception as exc:  # e.g. a $ref nothing resolves, or a schema that is not one
        issues = [Issue("$", f"The schema could not be applied: {exc}")]
    return AnswerCheck(valid=not issues, issues=tuple(issues))


def structured_check(*, text: str, response_format: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """For an answer under a JSON response format: {"valid", "errors": [{"path", "message"}]}
    (as a chat message keeps it); None for text answers and empty ones."""
    asked = answer_format(response_format)
    check = answer_check(text=text, answer_format=asked) if asked is not None else None
    return check.as_dict() if check is not None else None


def json_text_parse(text: str) -> tuple[Any, Issue | None]:
    """(value, None) for JSON text, else (None, where and why it is not JSON)."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, Issue("$", f"Not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.")
    except RecursionError:
        return None, Issue("$", "Not readable as JSON: it is nested too deeply.")


def violations(errors: Iterable[SchemaViolation]) -> list[Issue]:
    """jsonschema's errors as issues at their paths, shallowest first, at most `MAX_ERRORS_SHOWN`."""
    found = sorted(errors, key=lambda error: (len(error.absolute_path), list(map(str, error.absolute_path))))
    return [Issue(json_path(error.absolute_path), error.message) for error in found[:MAX_ERRORS_SHOWN]]
