"""Reading batch input: JSONL lines or CSV rows through a prompt template, checked line by line.

Every reader is a generator over a binary stream: it holds one line at a time, so checking
50,000 items takes as much memory as checking 50. Each line yields either an `ItemInput`
(the request body as it will be sent, minus the model) or a `LineError` with the line number
the user sees in their editor (blank JSONL lines count; CSV rows count their header and the
lines of quoted multi-line cells).

A line's fields (and the shared settings merged into it) are checked by the rules the chat
composer enforces for the same connection kind and model (`providers.request_rules`): the
parameters the kind and model take, their ranges, `max_tokens` within the context window,
tool and schema shapes. A value a provider would refuse is refused here, before anything is
stored, rather than failing its item (or, on a queue, its whole submission) later.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import IO, Any

from playground.lib.storable import is_storable
from playground.presets.variables import Variable, VariablesUnfilled, messages_fill
from playground.providers.adapters import ChatRequest
from playground.providers.request_rules import Capabilities, request_fields_problem

MAX_ITEMS = 50_000
LINE_MAX_BYTES = 1_000_000  # one item must fit a queue submission with room to spare
MAX_MESSAGES = 1_000
REFERENCE_MAX_CHARS = 200
ROLES = ("system", "user", "assistant", "tool")
# Fields every item may carry whatever the connection (the adapter sends them as such).
REQUEST_FIELDS = frozenset(
    {"max_tokens", "temperature", "tools", "tool_choice", "parallel_tool_calls", "response_format"}
)
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]+)\}")


@dataclass(frozen=True)
class ItemInput:
    line: int
    body: dict[str, Any]  # {"messages": [...], optional parameters}
    external_reference: str = ""

    def chat_request(self, model_id: str) -> ChatRequest:
        """What the preview counts and checks against the context window: what the model reads
        (messages, tools, response format) and the answer room `max_tokens` asks for."""
        return ChatRequest(
            model=model_id,
            messages=self.body["messages"],
            max_tokens=self.body.get("max_tokens"),
            tools=self.body.get("tools"),
            tool_choice=self.body.get("tool_choice"),
            response_format=self.body.get("response_format"),
        )


@dataclass(frozen=True)
class LineError:
    line: int
    message: str

    def __str__(self) -> str:
        return f"Line {self.line}: {self.message}" if self.line else self.message


@dataclass(frozen=True)
class Shared:
    """Settings applied to every item (from a conversation, or typed on the form); a line's own win."""

    system_prompt: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)  # tools, response_format, parameters
    # The preset's prompt variables with their defaults: a line's own values win (a JSONL line's
    # `variables` object, a CSV row's column of the variable's name).
    variables: tuple[Variable, ...] = ()


class InputRules:
    """What a line may hold: the connection kind's parameters plus the common request fields,
    within what the kind and the model take (`caps`)."""

    def __init__(
        self, *, parameters: Iterable[str], caps: Capabilities, shared: Shared | None = None
    ) -> None:
        self.allowed = REQUEST_FIELDS | frozenset(parameters)
        self.caps = caps
        self.shared = shared or Shared()
        self._references: set[bytes] = set()

    def item(self, line: int, raw: Any, *, cells: Mapping[str, str] | None = None) -> ItemInput | LineError:
        """The line's item; `cells`: a CSV row's, by column, which fill the variables of their name."""
        if not isinstance(raw, dict):
            return LineError(line, f"expected a JSON object, got {_json_type(raw)}.")
        body = dict(raw)
        values = body.pop("variables", None) if cells is None else cells
        if cells is None and values is not None and (problem := self._variables_problem(values)):
            return LineError(line, problem)
        reference = body.pop("external_reference", None)
        if reference is not None and not isinstance(reference, str):
            return LineError(line, "`external_reference` must be a string.")
        reference = reference or ""
        problem = self._reference_problem(reference) or self._body_problem(body)
        if problem:
            return LineError(line, problem)
        merged = self._with_shared(body)
        problem = request_fields_problem(merged, self.caps)
        if problem:
            return LineError(line, problem)
        try:
            merged = self._with_variables(merged, values or {}, from_columns=cells is not None)
        except VariablesUnfilled as exc:
            return LineError(line, " ".join(exc.messages))
        return ItemInput(line=line, body=merged, external_reference=reference)

    def _variables_problem(self, values: Any) -> str:
        if not isinstance(values, Mapping):
            return '`variables` must be an object of values by name, e.g. {"customer": "Ada"}.'
        declared = [variable.name for variable in self.shared.variables]
        unknown = sorted(name for name in values if name not in declared)
        if unknown:
            known = f"its variables are {', '.join(declared)}" if declared else "it declares none"
            names = ", ".join(unknown)
            return f"`variables` names {names}, which the batch's preset does not declare ({known})."
        return ""

    def _with_variables(
        self, body: dict[str, Any], values: Mapping[str, Any], *, from_columns: bool
    ) -> dict[str, Any]:
        """The body with the variables filled in (the line's values over the defaults), and the
        values used under `variables` (kept on the record, never sent)."""
        if not self.shared.variables:
            return body
        variables = [
            replace(variable, value=_value_text(values[variable.name]))
            if variable.name in values
            else variable
            for variable in self.shared.variables
        ]
        try:
            messages, used = messages_fill(body["messages"], variables)
        except VariablesUnfilled as exc:
            where = "a column" if from_columns else "`variables`"
            raise VariablesUnfilled(
                [*exc.messages, f"Give the line's value in {where} of that name."]
            ) from None
        return {**body, "messages": messages, **({"variables": used} if used else {})}

    def _reference_problem(self, reference: str) -> str:
        if len(reference) > REFERENCE_MAX_CHARS:
            return f"`external_reference` is longer than {REFERENCE_MAX_CHARS} characters."
        if reference:
            digest = hashlib.blake2b(reference.encode("utf-8", "surrogatepass"), digest_size=12).digest()
            if digest in self._references:
                return f"`external_reference` {reference!r} is used by an earlier line; each must be unique."
            self._references.add(digest)
        return ""

    def _body_problem(self, body: dict[str, Any]) -> str:
        if "model" in body:
            return "`model` is chosen for the whole batch; remove it from the line."
        if body.get("stream"):
            return "batch items cannot stream; remove `stream`."
        body.pop("stream", None)
        if "prompt" in body and "messages" not in body:
            prompt = body.pop("prompt")
            if not isinstance(prompt, str) or not prompt.strip():
                return "`prompt` must be non-empty text."
            body["messages"] = [{"role": "user", "content": prompt}]
        unknown = sorted(key for key in body if key != "messages" and key not in self.allowed)
        if unknown:
            return (
                f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(f'`{key}`' for key in unknown)}; "
                "this connection takes `messages`, `external_reference` and "
                f"{', '.join(sorted(self.allowed))}."
            )
        problem = _messages_problem(body.get("messages"))
        if not problem and not _storable(body):
            problem = "the line contains a character that cannot be stored (a lone surrogate or NUL)."
        return problem

    def _with_shared(self, body: dict[str, Any]) -> dict[str, Any]:
        merged = {**self.shared.fields, **body}
        messages = body["messages"]
        if self.shared.system_prompt and not any(m.get("role") == "system" for m in messages):
            merged["messages"] = [{"role": "system", "content": self.shared.system_prompt}, *messages]
        return merged


def jsonl_items(stream: IO[bytes] | Iterable[bytes], rules: InputRules) -> Iterator[ItemInput | LineError]:
    """One result per non-blank line; stops after `MAX_ITEMS` items with an error saying so."""
    count = 0
    for number, raw in enumerate(_lines(stream), start=1):
        if len(raw) > LINE_MAX_BYTES:
            yield LineError(number, f"the line is {len(raw):,} bytes; the limit is {LINE_MAX_BYTES:,}.")
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield LineError(number, f"not UTF-8 text (byte {exc.start + 1}).")
            continue
        text = text.removeprefix("\ufeff") if number == 1 else text
        if not text.strip():
            continue
        count += 1
        if count > MAX_ITEMS:
            yield LineError(number, f"more than {MAX_ITEMS:,} items; split the input into several batches.")
            return
        try:
            value = json.loads(text, parse_constant=_refuse_constant)
        except ValueError as exc:
            yield LineError(number, f"not valid JSON: {_json_error(exc)}.")
            continue
        yield rules.item(number, value)


def csv_items(stream: IO[bytes], *, template: str, rules: InputRules) -> Iterator[ItemInput | LineError]:
    """One item per CSV row: the template's `{column}` placeholders filled from the row.

    The first row names the columns. `{{` and `}}` are literal braces. A column named
    `external_reference` becomes the item's reference instead of text.
    """
    text = _decoded_lines(stream)
    reader = csv.reader(text)
    try:
        header = next(reader)
    except StopIteration:
        yield LineError(1, "the CSV is empty; its first row must name the columns.")
        return
    except (_NotUTF8, csv.Error) as exc:
        yield LineError(getattr(exc, "line", 1), _csv_error(exc))
        return
    columns = [name.strip() for name in header]
    problem = _template_problem(template, columns)
    if problem:
        yield LineError(0, problem)
        return
    reference_column = columns.index("external_reference") if "external_reference" in columns else None
    count = 0
    last_line = reader.line_num
    while True:
        first_line = last_line + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except (_NotUTF8, csv.Error) as exc:
            yield LineError(getattr(exc, "line", first_line), _csv_error(exc))
            return
        last_line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        count += 1
        if count > MAX_ITEMS:
            yield LineError(
                first_line, f"more than {MAX_ITEMS:,} rows; split the input into several batches."
            )
            return
        if len(row) != len(columns):
            yield LineError(first_line, f"the row has {len(row)} fields; the header has {len(columns)}.")
            continue
        cells = dict(zip(columns, row, strict=True))
        prompt, missing = _fill(template, cells)
        if missing:
            yield LineError(first_line, f"column `{missing}` is empty; the template needs it.")
            continue
        raw: dict[str, Any] = {"messages": [{"role": "user", "content": prompt}]}
        if reference_column is not None:
            raw["external_reference"] = row[reference_column]
        filled = {name: value for name, value in cells.items() if value.strip()}  # empty: the default
        yield rules.item(first_line, raw, cells=filled)


def template_columns(template: str) -> list[str]:
    return [match.group(1).strip() for match in _PLACEHOLDER.finditer(template) if match.group(1)]


def _template_problem(template: str, columns: list[str]) -> str:
    if not template.strip():
        return "Write a prompt template, e.g. `Summarise: {text}`, naming CSV columns in braces."
    names = template_columns(template)
    if not names:
        return "The template names no column; put a column name in braces, e.g. {text}."
    unknown = [name for name in names if name not in columns]
    if unknown:
        return (
            f"The template uses {', '.join(f'{{{name}}}' for name in unknown)}, which the CSV header "
            f"does not have (its columns: {', '.join(columns) or 'none'})."
        )
    return ""


def _fill(template: str, cells: Mapping[str, str]) -> tuple[str, str]:
    """(prompt, "") or ("", the first empty column)."""
    missing = ""

    def replace(match: re.Match[str]) -> str:
        nonlocal missing
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        value = cells[match.group(1).strip()]
        if not value.strip() and not missing:
            missing = match.group(1).strip()
        return value

    prompt = _PLACEHOLDER.sub(replace, template)
    return ("", missing) if missing else (prompt, "")


def _lines(stream: IO[bytes] | Iterable[bytes]) -> Iterator[bytes]:
    """Lines without their ending; a `\\r\\n` file reads like a `\\n` one."""
    for line in stream:
        yield line.rstrip(b"\r\n")


def _messages_problem(messages: Any) -> str:
    if messages is None:
        return "`messages` is missing; each line needs a list of chat messages (or a `prompt`)."
    if not isinstance(messages, list) or not messages:
        return "`messages` must be a non-empty list of chat messages."
    if len(messages) > MAX_MESSAGES:
        return f"`messages` has {len(messages):,} messages; the limit is {MAX_MESSAGES:,}."
    for position, message in enumerate(messages):
        where = f"`messages[{position}]`"
        if not isinstance(message, dict):
            return f"{where} must be an object with `role` and `content`."
        role = message.get("role")
        if role not in ROLES:
            return f"{where} has role {role!r}; use one of {', '.join(ROLES)}."
        content = message.get("content")
        if isinstance(content, str | list) or (content is None and message.get("tool_calls")):
            continue
        return f"{where}.content must be text (or a list of content parts)."
    return ""


def _value_text(value: Any) -> str:
    """A line's value as the variable's text: a JSON line may give a number or an object."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _storable(value: Any) -> bool:
    if isinstance(value, str):
        return is_storable(value)
    if isinstance(value, dict):
        return all(_storable(key) and _storable(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_storable(item) for item in value)
    return True


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _json_error(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    return str(exc)


def _json_type(value: Any) -> str:
    names = {list: "a list", str: "a string", bool: "true or false", type(None): "null"}
    return names.get(type(value), "a number")


class _NotUTF8(Exception):
    def __init__(self, line: int) -> None:
        super().__init__(f"line {line} is not UTF-8")
        self.line = line


def _decoded_lines(stream: IO[bytes]) -> Iterator[str]:
    """Text lines (endings kept, as `csv` wants them), decoded one by one so a bad byte has a line."""
    for number, raw in enumerate(stream, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _NotUTF8(number) from None
        yield text.removeprefix("\ufeff") if number == 1 else text


def _csv_error(exc: Exception) -> str:
    if isinstance(exc, _NotUTF8):
        return "not UTF-8 text; save the CSV as UTF-8."
    return f"the CSV cannot be read ({exc})."


def utf8_lines(text: str) -> io.BytesIO:
    """Pasted text as the binary stream the readers take."""
    return io.BytesIO(codecs.encode(text, "utf-8", "surrogatepass"))
