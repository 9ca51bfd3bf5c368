"""Prompt variables: `{{name}}` placeholders in a setup's texts, filled when a request is sent.

A setup (a conversation, a comparison, a preset version) declares its variables, each
`{"name", "type", "value"}`: the type is text, number or JSON, and the value is what the user
typed (a preset version's is the default a conversation starts with). When a request is built,
every placeholder of a declared variable in the system prompt, the user messages and the
assistant messages is replaced by its value; the stored texts keep their placeholders, so
changing a value and sending again is the whole loop. A placeholder whose name is not declared
is sent as written (code and templates that use braces are not rewritten behind the user's back);
`{{name}}` written as `\\{{name}}` is sent as `{{name}}` even when declared.

A request whose texts use a variable with no value, or a value its type refuses (a number that
is not one, JSON that does not parse), is refused before anything is sent (`VariablesUnfilled`).
The values a request was sent with are kept on its usage record (`sent_values`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from playground.providers.json_problems import Issue

TEXT, NUMBER, JSON = "text", "number", "json"
TYPES = (TEXT, NUMBER, JSON)
MAX_VARIABLES = 50
NAME_MAX_CHARS = 64
VALUE_MAX_CHARS = 100_000
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# `{{ name }}` (spaces allowed inside), or the same escaped with a backslash.
PLACEHOLDER = re.compile(r"(\\?)\{\{\s*([A-Za-z_][A-Za-z0-9_]{0,63})\s*\}\}")
# The roles whose text is filled; tool results are data the tools returned and stay as they are.
FILLED_ROLES = frozenset({"system", "user", "assistant"})


@dataclass(frozen=True)
class Variable:
    name: str
    type: str = TEXT
    value: str = ""

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "type": self.type, "value": self.value}

    def problem(self) -> str:
        """Why the value cannot be sent ("" when it can)."""
        if not self.value.strip():
            return f"Fill in {{{{{self.name}}}}}: the prompt uses it and it has no value."
        if self.type == NUMBER:
            try:
                number = float(self.value.strip())
            except ValueError:
                return f"{{{{{self.name}}}}} is a number; {self.value.strip()[:40]!r} is not one."
            if not math.isfinite(number):
                return f"{{{{{self.name}}}}} is a number; it must be finite."
        if self.type == JSON:
            try:
                json.loads(self.value)
            except ValueError as exc:
                return f"{{{{{self.name}}}}} is JSON, and its value does not parse: {exc}."
        return ""

    @property
    def sent(self) -> str:
        """The text that replaces its placeholders: numbers and JSON without surrounding space."""
        return self.value if self.type == TEXT else self.value.strip()


class VariablesUnfilled(ValidationError):
    """A request uses variables that have no value or a value their type refuses."""


def variables_read(raw: Any) -> list[Variable]:
    """Stored declarations as `Variable`s (a stored list is checked when saved; bad rows are skipped)."""
    if not isinstance(raw, list):
        return []
    return [
        Variable(name=row["name"], type=row.get("type", TEXT), value=str(row.get("value", "")))
        for row in raw
        if isinstance(row, dict) and isinstance(row.get("name"), str) and row.get("type", TEXT) in TYPES
    ]


def variables_problems(raw: Any, path: str) -> list[Issue]:
    """Every problem of a list of declarations, each at its JSON path (a value may be empty)."""
    if not isinstance(raw, list):
        return [Issue(path, 'Must be an array of {"name", "type", "value"}.')]
    if len(raw) > MAX_VARIABLES:
        return [Issue(path, f"At most {MAX_VARIABLES} variables.")]
    problems: list[Issue] = []
    names: set[str] = set()
    for index, row in enumerate(raw):
        where = f"{path}[{index}]"
        if not isinstance(row, dict):
            problems.append(Issue(where, 'Must be an object: {"name", "type", "value"}.'))
            continue
        unknown = sorted(set(row) - {"name", "type", "value"})
        if unknown:
            problems.append(
                Issue(f"{where}.{unknown[0]}", "Unknown field; a variable has name, type and value.")
            )
        name = row.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            problems.append(
                Issue(
                    f"{where}.name", f"A name of letters, digits and _ (not first), at most {NAME_MAX_CHARS}."
                )
            )
        elif name in names:
            problems.append(Issue(f"{where}.name", f"{name!r} is declared twice."))
        else:
            names.add(name)
        if row.get("type", TEXT) not in TYPES:
            problems.append(Issue(f"{where}.type", f"One of {', '.join(TYPES)}."))
        value = row.get("value", "")
        if not isinstance(value, str):
            problems.append(Issue(f"{where}.value", "Must be text (a number or JSON is written as text)."))
        elif len(value) > VALUE_MAX_CHARS:
            problems.append(Issue(f"{where}.value", f"At most {VALUE_MAX_CHARS:,} characters."))
    return problems


def placeholder_names(texts: Iterable[str]) -> list[str]:
    """The names the texts' placeholders use, in order of first use (escaped ones left out)."""
    seen: dict[str, None] = {}
    for text in texts:
        for match in PLACEHOLDER.finditer(text):
            if not match.group(1):
                seen.setdefault(match.group(2), None)
    return list(seen)


def messages_fill(
    messages: Sequence[Mapping[str, Any]], variables: Sequence[Variable]
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The messages with the declared variables' placeholders filled, and the values used.

    Raises `VariablesUnfilled` naming every used variable that cannot be sent."""
    declared = {variable.name: variable for variable in variables}
    used: dict[str, Variable] = {}

    def replace(match: re.Match[str]) -> str:
        escaped, name = match.group(1), match.group(2)
        variable = declared.get(name)
        if variable is None:
            return match.group(0)
        if escaped:
            return match.group(0)[1:]
        used[name] = variable
        return variable.sent

    filled = [_message_fill(message, replace) for message in messages] if declared else list(messages)
    problems = [problem for variable in used.values() if (problem := variable.problem())]
    if problems:
        raise VariablesUnfilled(problems)
    return [dict(message) for message in filled], {name: variable.sent for name, variable in used.items()}


def _message_fill(message: Mapping[str, Any], replace: Any) -> dict[str, Any]:
    if message.get("role") not in FILLED_ROLES:
        return dict(message)
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": PLACEHOLDER.sub(replace, content)}
    if isinstance(content, list):
        parts = [
            {**part, "text": PLACEHOLDER.sub(replace, part["text"])}
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
            else part
            for part in content
        ]
        return {**message, "content": parts}
    return dict(message)


def variables_declared(
    variables: Sequence[Variable], texts: Iterable[str], *, typed: Mapping[str, str] | None = None
) -> list[Variable]:
    """`variables` plus a text variable (empty) for each new placeholder name the texts use.

    Writing `{{customer}}` into a system prompt declares it: the Variables panel then shows it."""
    known = {variable.name for variable in variables}
    added = [
        Variable(name=name, type=(typed or {}).get(name, TEXT))
        for name in placeholder_names(texts)
        if name not in known
    ]
    return [*variables, *added][:MAX_VARIABLES]


def values_problems(variables: Sequence[Variable]) -> dict[str, str]:
    """Each variable whose (non-empty) value its type refuses, by name: what a form shows."""
    return {
        variable.name: problem
        for variable in variables
        if variable.value.strip() and (problem := variable.problem())
    }
