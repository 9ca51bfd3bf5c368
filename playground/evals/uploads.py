"""Reading a dataset upload: JSONL lines or CSV rows, each an item or the reason its line is refused.

A JSONL line is an object with `input` (the user's message) or `messages` (a chat), optional
`variables` (values for a preset's `{{variables}}`), `expected` (the answer checks compare with)
and `metadata` (an object kept with the item). A CSV's first row names its columns: `input`,
`expected`, `messages` and `metadata` (JSON text) are those fields, any other column is a
variable of that name. Readers are generators: they hold one line at a time.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from playground.batches.inputs import LineError
from playground.lib.storable import storable_json

MAX_ITEMS = 50_000
LINE_MAX_BYTES = 1_000_000
FIELDS = ("input", "messages", "variables", "expected", "metadata")
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class ItemFields:
    """One item as stored (`DatasetItem`'s fields)."""

    input: str = ""
    messages: list[dict[str, Any]] | None = None
    variables: dict[str, str] = field(default_factory=dict)
    expected: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


def item_fields(raw: Any) -> ItemFields | str:
    """The item a JSON object describes, or why it cannot be one."""
    if not isinstance(raw, dict):
        return "expected a JSON object with `input` or `messages`."
    unknown = sorted(key for key in raw if key not in FIELDS)
    if unknown:
        return (
            f"unknown field(s) {', '.join(f'`{key}`' for key in unknown)}; an item takes {', '.join(FIELDS)}."
        )
    text, messages = raw.get("input"), raw.get("messages")
    if text is not None and not isinstance(text, str):
        return "`input` must be text."
    if messages is not None and (problem := _messages_problem(messages)):
        return problem
    if not (text or "").strip() and not messages:
        return "the item has neither `input` nor `messages`."
    variables = raw.get("variables") or {}
    if not isinstance(variables, dict):
        return '`variables` must be an object of values by name, e.g. {"customer": "Ada"}.'
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        return "`metadata` must be an object."
    expected = raw.get("expected")
    fields = ItemFields(
        input=text or "",
        messages=messages or None,
        variables={str(name): _text(value) for name, value in variables.items()},
        expected="" if expected is None else _text(expected),
        metadata=metadata,
    )
    if storable_json(raw) != raw:  # a lone surrogate or NUL (or NaN) the database would refuse
        return "the line contains a character that cannot be stored (a lone surrogate or NUL)."
    return fields


def jsonl_item_fields(stream: IO[bytes]) -> Iterator[tuple[int, ItemFields | LineError]]:
    count = 0
    for number, raw in enumerate(stream, start=1):
        line = raw.rstrip(b"\r\n")
        if len(line) > LINE_MAX_BYTES:
            yield (
                number,
                LineError(number, f"the line is {len(line):,} bytes; the limit is {LINE_MAX_BYTES:,}."),
            )
            continue
        try:
            text = line.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as exc:
            yield number, LineError(number, f"not UTF-8 text (byte {exc.start + 1}).")
            continue
        if not text.strip():
            continue
        count += 1
        if count > MAX_ITEMS:
            yield number, LineError(number, f"more than {MAX_ITEMS:,} items; split the file.")
            return
        try:
            value = json.loads(text)
        except ValueError as exc:
            where = f" at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
            yield number, LineError(number, f"not valid JSON{where}.")
            continue
        fields = item_fields(value)
        yield number, LineError(number, fields) if isinstance(fields, str) else fields


def csv_item_fields(stream: IO[bytes]) -> Iterator[tuple[int, ItemFields | LineError]]:
    reader = csv.reader(_decoded(stream))
    try:
        columns = [name.strip() for name in next(reader)]
    except (StopIteration, csv.Error, UnicodeDecodeError):
        yield 1, LineError(1, "the CSV is empty or unreadable; its first row must name the columns.")
        return
    if "input" not in columns and "messages" not in columns:
        yield 1, LineError(1, "the header needs an `input` or a `messages` column.")
        return
    last = reader.line_num
    while True:
        first = last + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield first, LineError(first, f"the CSV cannot be read ({exc}).")
            return
        except UnicodeDecodeError:
            yield first, LineError(first, "not UTF-8 text; save the CSV as UTF-8.")
            return
        last = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(columns):
            yield first, LineError(first, f"the row has {len(row)} fields; the header has {len(columns)}.")
            continue
        fields = _row_fields(dict(zip(columns, row, strict=True)))
        yield first, LineError(first, fields) if isinstance(fields, str) else fields


def _decoded(stream: IO[bytes]) -> Iterator[str]:
    """Text lines, one at a time (endings kept, as `csv` wants them)."""
    for number, raw in enumerate(stream):
        text = raw.decode("utf-8")
        yield text.removeprefix("\ufeff") if number == 0 else text


def _row_fields(cells: Mapping[str, str]) -> ItemFields | str:
    raw: dict[str, Any] = {"variables": {}}
    for name, value in cells.items():
        if name in ("messages", "metadata"):
            if value.strip():
                try:
                    raw[name] = json.loads(value)
                except ValueError:
                    return f"column `{name}` is not valid JSON."
        elif name in ("input", "expected"):
            raw[name] = value
        elif value.strip():
            raw["variables"][name] = value
    return item_fields(raw)


def _messages_problem(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        return "`messages` must be a non-empty list of chat messages."
    for position, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            return f"`messages[{position}]` must be an object with a role ({', '.join(ROLES)}) and content."
        if not isinstance(message.get("content"), str):
            return f"`messages[{position}].content` must be text."
    return ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
