"""Closing a JSON answer that `max_tokens` cut short, from the parse state of what was emitted.

`JsonCloser` reads the answer as it is generated (character by character: open strings and
their escapes, numbers, literals, the stack of objects and arrays, a key waiting for its colon
or value) and says at any moment which text would close it: the end of the string or number
under way, then for each open container the values its schema still requires, then its bracket.
The schema steers that text the way the output grammar (`output.grammar_for`) steers the model:
a cut enum value is completed to the member it started, a cut key to the property it started,
missing required properties come in the grammar's order with the smallest value their schema
allows (`smallest_json`), a string shorter than its `minLength` is padded with "…". Text is only
ever appended: what was streamed cannot be taken back. Where the schema cannot be followed
(a `pattern`, a `format`, an unresolvable `$ref`), the text still parses and the caller's
schema check says what does not hold.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Schema = dict[str, Any]
Expect = Literal["value", "value_or_end", "key", "key_or_end", "colon", "comma_or_end"]
Kind = Literal["object", "array", "string", "number", "literal"]

PAD = "…"  # fills a string up to its minLength: visibly not the model's text
_LITERALS = ("true", "false", "null")
_NUMBER_CHARS = frozenset("0123456789+-.eE")
_HEX = frozenset("0123456789abcdefABCDEF")
_LOCAL_REF = re.compile(r"#/(\$defs|definitions)/(.+)")


class JsonStateError(ValueError):
    """The text is not JSON the grammar could have produced."""


@dataclass
class _Container:
    kind: Literal["object", "array"]
    schema: Schema | None  # None: any JSON
    expect: Expect
    keys: list[str] = field(default_factory=list)  # raw (escaped) keys, in order
    key: str = ""  # the key whose colon or value comes next
    items: int = 0


@dataclass
class _Scalar:
    kind: Literal["key", "string", "number", "literal"]
    schema: Schema | None
    raw: str = ""  # the text after the opening quote (strings) or so far (numbers, literals)
    chars: int = 0  # decoded characters of a string so far
    escape: str = ""  # "\\" or "\\u" plus its hex digits so far, inside a string


class JsonCloser:
    def __init__(self, schema: Schema | None) -> None:
        self.root = schema
        self._stack: list[_Container] = []
        self._scalar: _Scalar | None = None
        self._started = False
        self.done = False  # the root value is complete

    def copy(self) -> JsonCloser:
        twin = JsonCloser(self.root)
        twin._stack = [replace(frame, keys=list(frame.keys)) for frame in self._stack]
        twin._scalar = None if self._scalar is None else replace(self._scalar)
        twin._started, twin.done = self._started, self.done
        return twin

    def feed(self, text: str) -> None:
        for char in text:
            self._char(char)

    def closing(self) -> str:
        """The text that, appended to what was fed, completes the JSON value."""
        if self.done:
            return ""
        if not self._started:
            return smallest_json(self.root, self.root)
        out: list[str] = []
        stack = [replace(frame, keys=list(frame.keys)) for frame in self._stack]
        if self._scalar is not None:
            out.append(self._close_scalar(self._scalar, stack[-1] if stack else None))
            if self._scalar.kind != "key" and stack:
                _mark_done(stack[-1])
        while stack:
            out.append(self._close_container(stack.pop()))
            if stack:
                _mark_done(stack[-1])
        return "".join(out)

    # --- reading ---

    def _char(self, char: str) -> None:
        if self.done:
            if not char.isspace():
                raise JsonStateError(f"text after the end of the JSON value: {char!r}")
            return
        scalar = self._scalar
        if scalar is not None:
            if scalar.kind in ("key", "string"):
                self._string_char(scalar, char)
                return
            if scalar.kind == "number" and char in _NUMBER_CHARS:
                scalar.raw += char
                return
            if scalar.kind == "literal":
                scalar.raw += char
                if not any(word.startswith(scalar.raw) for word in _LITERALS):
                    raise JsonStateError(f"not a literal: {scalar.raw!r}")
                if scalar.raw in _LITERALS:
                    self._value_done()
                return
            self._value_done()  # a number ends at the first character that is not part of it
            if self.done:
                self._char(char)
                return
        if char.isspace():
            return
        self._structural(char)

    def _string_char(self, scalar: _Scalar, char: str) -> None:
        if scalar.escape == "\\":
            scalar.escape = "\\u" if char == "u" else ""
            scalar.chars += char != "u"
        elif scalar.escape:
            if char not in _HEX:
                raise JsonStateError(f"not a hex digit in a \\u escape: {char!r}")
            scalar.escape += char
            if len(scalar.escape) == 6:
                scalar.escape = ""
                scalar.chars += 1
        elif char == "\\":
            scalar.escape = "\\"
        elif char == '"':
            if scalar.kind == "key":
                frame = self._stack[-1]
                frame.key, frame.expect = scalar.raw, "colon"
                self._scalar = None
                return
            self._value_done()
            return
        else:
            scalar.chars += 1
        scalar.raw += char

    def _structural(self, char: str) -> None:
        frame = self._stack[-1] if self._stack else None
        expect: Expect = frame.expect if frame else "value"
        if frame is None and self._started:
            raise JsonStateError(f"unexpected {char!r}")
        if expect in ("value", "value_or_end"):
            if char == "]" and expect == "value_or_end":
                self._pop()
            else:
                self._open_value(char, self._child_schema(frame))
        elif expect in ("key", "key_or_end") and frame is not None:
            if char == '"':
                self._scalar = _Scalar("key", frame.schema)
            elif char == "}" and expect == "key_or_end":
                self._pop()
            else:
                raise JsonStateError(f"expected a key, got {char!r}")
        elif expect == "colon" and frame is not None:
            if char != ":":
                raise JsonStateError(f"expected ':', got {char!r}")
            frame.expect = "value"
        elif frame is not None:  # comma_or_end
            if char == ",":
                frame.expect = "key" if frame.kind == "object" else "value"
            elif char == ("}" if frame.kind == "object" else "]"):
                self._pop()
            else:
                raise JsonStateError(f"expected ',' or the end of the {frame.kind}, got {char!r}")

    def _open_value(self, char: str, schema: Schema | None) -> None:
        self._started = True
        if char == "{":
            self._stack.append(_Container("object", _branch(schema, "object", self.root), "key_or_end"))
        elif char == "[":
            self._stack.append(_Container("array", _branch(schema, "array", self.root), "value_or_end"))
        elif char == '"':
            self._scalar = _Scalar("string", _branch(schema, "string", self.root))
        elif char == "-" or char.isdigit():
            self._scalar = _Scalar("number", schema, raw=char)
        elif char in "tfn":
            self._scalar = _Scalar("literal", schema, raw=char)
        else:
            raise JsonStateError(f"expected a value, got {char!r}")

    def _pop(self) -> None:
        self._stack.pop()
        self._value_done()

    def _value_done(self) -> None:
        self._scalar = None
        if not self._stack:
            self.done = True
            return
        _mark_done(self._stack[-1])

    def _child_schema(self, frame: _Container | None) -> Schema | None:
        if frame is None:
            return self.root
        if frame.kind == "object":
            return _property_schema(frame.schema, frame.key, self.root)
        return _item_schema(frame.schema, frame.items, self.root)

    # --- closing ---

    def _close_scalar(self, scalar: _Scalar, frame: _Container | None) -> str:
        if scalar.kind == "number":
            return "0" if scalar.raw[-1] in "-+.eE" else ""
        if scalar.kind == "literal":
            return next(word for word in _LITERALS if word.startswith(scalar.raw))[len(scalar.raw) :]
        # A cut `\` becomes a backslash; a cut `\u` escape gets the digits of a space (`\u0020`)
        # where it has none of its own yet.
        text = {"\\": "\\", "": ""}.get(scalar.escape, "0020"[len(scalar.escape) - 2 :])
        raw = scalar.raw + text
        chars = scalar.chars + bool(scalar.escape)
        if scalar.kind == "key":
            assert frame is not None
            name = _key_completion(frame, raw, self.root)
            frame.key = name
            _mark_done(frame)
            value = _property_schema(frame.schema, name, self.root)
            return f'{text}{name[len(raw) :]}":{smallest_json(value, self.root)}'
        members = _string_members(scalar.schema)
        started = [member for member in members if member.startswith(raw)]
        if started:
            return f'{text}{min(started, key=len)[len(raw) :]}"'
        minimum = (scalar.schema or {}).get("minLength", 0)
        return f'{text}{PAD * max(0, minimum - chars)}"'

    def _close_container(self, frame: _Container) -> str:
        out: list[str] = []
        if frame.kind == "array":
            if frame.expect == "value":
                out.append(smallest_json(_item_schema(frame.schema, frame.items, self.root), self.root))
                frame.items += 1
            while frame.items < _fewest_items(frame.schema or {}):
                item = smallest_json(_item_schema(frame.schema, frame.items, self.root), self.root)
                out.append(("," if frame.items else "") + item)
                frame.items += 1
            return "".join(out) + "]"
        if frame.expect == "colon":
            out.append(":")
            frame.expect = "value"
        if frame.expect == "value":
            out.append(smallest_json(_property_schema(frame.schema, frame.key, self.root), self.root))
            frame.keys.append(frame.key)
        elif frame.expect == "key":  # after a comma: a property must follow
            name = _next_key(frame, self.root)
            value = _property_schema(frame.schema, name, self.root)
            out.append(f'"{name}":{smallest_json(value, self.root)}')
            frame.keys.append(name)
        for name in _missing_required(frame.schema, frame.keys, self.root):
            out.append(f'{"," if frame.keys else ""}"{name}":')
            out.append(smallest_json(_property_schema(frame.schema, name, self.root), self.root))
            frame.keys.append(name)
        return "".join(out) + "}"


def _mark_done(frame: _Container) -> None:
    """The value after `frame`'s key (or its next item) is complete."""
    if frame.kind == "object":
        frame.keys.append(frame.key)
    else:
        frame.items += 1
    frame.expect = "comma_or_end"


# --- schemas, read as the grammar builder (llama_cpp.llama_grammar) reads them ---


def smallest_json(schema: Schema | None, root: Schema | None) -> str:
    """The shortest compact JSON text the grammar of `schema` allows (for a closing, or to
    tell the smallest answer of a schema)."""
    if schema is None:
        return "null"
    schema = _resolve(schema, root)
    if "const" in schema:
        return _dumps(schema["const"])
    if "enum" in schema:
        return min((_dumps(value) for value in schema["enum"]), key=len)
    branches = _branches(schema)
    if branches is not None:
        return min((smallest_json(branch, root) for branch in branches), key=len)
    kind = schema.get("type")
    shape = _kind_of(schema, root)
    if shape == {"object"}:
        properties, required, _ = _object_view(schema, root)
        names = [name for name, _ in properties if name in required]
        body = ",".join(f"{_dumps(name)}:{smallest_json(dict(properties)[name], root)}" for name in names)
        return "{" + body + "}"
    if shape == {"array"}:
        items = (smallest_json(_item_schema(schema, i, root), root) for i in range(_fewest_items(schema)))
        return "[" + ",".join(items) + "]"
    if shape == {"string"}:
        return '"' + PAD * int(schema.get("minLength", 0)) + '"'
    if kind in ("integer", "number"):
        return _smallest_number(schema, integer=kind == "integer")
    if kind == "boolean":
        return "false"
    return "null"


def _smallest_number(schema: Schema, *, integer: bool) -> str:
    """0, or the nearest bound to it (`minimum`, `exclusiveMinimum`, `maximum`)."""
    value: float = 0
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is None and isinstance(schema.get("exclusiveMinimum"), int | float):
        low = schema["exclusiveMinimum"] + 1 if integer else schema["exclusiveMinimum"] + 0.5
    if isinstance(low, int | float) and value < low:
        value = low
    if isinstance(high, int | float) and value > high:
        value = high
    return _dumps(math.ceil(value) if integer or float(value).is_integer() else value)


def _dumps(value: Any) -> str:
    # ensure_ascii, as the grammar builder writes its literals
    return json.dumps(value, separators=(",", ":"))


def _resolve(schema: Schema, root: Schema | None, depth: int = 0) -> Schema:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or depth > 32:
        return schema
    target: Any = root
    if ref != "#":
        match = _LOCAL_REF.fullmatch(ref)
        if not match or not isinstance(root, dict):
            return {}
        target = root.get(match.group(1), {}).get(match.group(2))
    return _resolve(target, root, depth + 1) if isinstance(target, dict) else {}


def _branches(schema: Schema) -> list[Schema] | None:
    union = schema.get("oneOf") or schema.get("anyOf")
    if isinstance(union, list):
        return [branch for branch in union if isinstance(branch, dict)]
    if isinstance(schema.get("type"), list):
        return [{**schema, "type": kind} for kind in schema["type"]]
    return None


def _kind_of(schema: Schema, root: Schema | None) -> set[str]:
    """The JSON kinds a value of `schema` may start as (object, array, string, other)."""
    schema = _resolve(schema, root)
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        return {
            "object"
            if isinstance(v, dict)
            else "array"
            if isinstance(v, list)
            else "string"
            if isinstance(v, str)
            else "other"
            for v in values
        }
    branches = _branches(schema)
    if branches is not None:
        return set().union(*(_kind_of(branch, root) for branch in branches))
    kind = schema.get("type")
    if kind in ("object", "array", "string"):
        return {kind}
    if kind is None:
        if "properties" in schema or "allOf" in schema or "additionalProperties" in schema or not schema:
            return {"object"}
        if "items" in schema or "prefixItems" in schema:
            return {"array"}
        return {"string"} if "pattern" in schema or "minLength" in schema else {"other"}
    return {"other"}


def _branch(schema: Schema | None, kind: Kind, root: Schema | None) -> Schema | None:
    """The part of `schema` a value opened as `kind` follows (the first matching union branch)."""
    if schema is None:
        return None
    schema = _resolve(schema, root)
    branches = _branches(schema)
    if branches is None:
        return schema
    if kind == "string":
        strings = [_resolve(b, root) for b in branches if "string" in _kind_of(b, root)]
        if strings and all("enum" in b or "const" in b for b in strings):
            return {"enum": [m for b in strings for m in (b.get("enum") or [b.get("const")])]}
        free = [b for b in strings if "enum" not in b and "const" not in b]
        return _branch(free[0], kind, root) if free else None
    return next((_branch(b, kind, root) for b in branches if kind in _kind_of(b, root)), None)


def _object_view(
    schema: Schema | None, root: Schema | None
) -> tuple[list[tuple[str, Schema]], set[str], Any]:
    """(properties in the grammar's order, required names, additionalProperties)."""
    if not schema:
        return [], set(), True
    if "allOf" in schema and "properties" not in schema:
        properties: list[tuple[str, Schema]] = []
        required: set[str] = set()
        for part in schema["allOf"]:
            optional = "anyOf" in part
            for component in part["anyOf"] if optional else [part]:
                component = _resolve(component, root)
                for name, value in component.get("properties", {}).items():
                    properties.append((name, value))
                    if not optional:
                        required.add(name)
        return properties, required, False
    properties = list(schema.get("properties", {}).items())
    additional = schema.get("additionalProperties", True)
    if not properties and schema.get("type") == "object" and "additionalProperties" not in schema:
        additional = True
    return properties, set(schema.get("required", [])), additional


def _property_schema(schema: Schema | None, raw_key: str, root: Schema | None) -> Schema | None:
    properties, _, additional = _object_view(schema, root)
    for name, value in properties:
        if _raw(name) == raw_key:
            return value
    if isinstance(additional, dict):
        return additional
    return None


def _tuple_items(schema: Schema) -> list[Any] | None:
    items = schema.get("items") or schema.get("prefixItems")
    return items if isinstance(items, list) else None


def _fewest_items(schema: Schema) -> int:
    """The items an array of `schema` must have: all of a tuple, else `minItems`."""
    tuple_items = _tuple_items(schema)
    return len(tuple_items) if tuple_items is not None else int(schema.get("minItems", 0))


def _item_schema(schema: Schema | None, index: int, root: Schema | None) -> Schema | None:
    if schema is None:
        return None
    tuple_items = _tuple_items(schema)
    if tuple_items is not None:
        return tuple_items[index] if index < len(tuple_items) else None
    items = schema.get("items")
    return items if isinstance(items, dict) else None


def _raw(name: str) -> str:
    return _dumps(name)[1:-1]


def _missing_required(schema: Schema | None, keys: list[str], root: Schema | None) -> list[str]:
    properties, required, _ = _object_view(schema, root)
    return [_raw(name) for name, _ in properties if name in required and _raw(name) not in keys]


def _key_candidates(frame: _Container, root: Schema | None) -> list[str]:
    """Raw names the grammar allows next in `frame`: missing required ones first (in order),
    then optional ones after the last used."""
    properties, required, _ = _object_view(frame.schema, root)
    missing = _missing_required(frame.schema, frame.keys, root)
    if missing:
        return missing[:1]
    names = [_raw(name) for name, _ in properties if name not in required]
    used = [names.index(key) for key in frame.keys if key in names]
    return names[max(used) + 1 :] if used else names


def _key_completion(frame: _Container, raw: str, root: Schema | None) -> str:
    """The name a cut key becomes: the allowed property it started, else the key as it is."""
    return next((name for name in _key_candidates(frame, root) if name.startswith(raw)), raw)


def _next_key(frame: _Container, root: Schema | None) -> str:
    candidates = _key_candidates(frame, root)
    return candidates[0] if candidates else ""


def _string_members(schema: Schema | None) -> list[str]:
    """The raw texts (without quotes) a string of `schema` must be one of; [] when free."""
    if not schema:
        return []
    values = [schema["const"]] if "const" in schema else schema.get("enum", [])
    return [_raw(value) for value in values if isinstance(value, str)]
