"""How an answer must look: free text, JSON following a schema, or tool calls.

`tools`, `tool_choice`, `parallel_tool_calls` and `response_format` become an
`OutputPlan`: a generation mode, a llama.cpp GBNF grammar that makes the model's output
valid by construction (tool arguments against each tool's `parameters`, JSON answers
against their schema), and a note for the system prompt that tells the model what the
grammar expects. Every schema is checked here, so a bad one is refused before any
replica spends time on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import SchemaError
from jsonschema.validators import validator_for
from llama_cpp.llama_grammar import json_schema_to_gbnf

from playground.engine.errors import invalid_input
from playground.engine.messages import render_tool_calls
from playground.engine.protocol import Mode

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
# After the first character the text branch accepts anything, so generation can drop
# the grammar as soon as it knows the answer is text (see replica.generator).
_TEXT_BRANCH = "[^[] .*"


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class OutputPlan:
    mode: Mode = "text"
    grammar: str | None = None
    system_note: str = ""
    response_schema: dict[str, Any] | None = None
    tool_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)


def plan_output(body: Mapping[str, Any]) -> OutputPlan:
    tools = parse_tools(body.get("tools"))
    choice = _tool_choice(body.get("tool_choice"), tools)
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise invalid_input("`parallel_tool_calls` must be true or false.")
    response_schema = _response_schema(body.get("response_format"))
    tools_note = _tools_note(tools)
    if choice == "none" or not tools:
        if response_schema is None:
            return OutputPlan(system_note=tools_note)
        return OutputPlan(
            mode="json",
            grammar=grammar_for(response_schema, "response_format"),
            system_note="\n\n".join(note for note in (tools_note, _json_note(response_schema)) if note),
            response_schema=response_schema,
        )
    if response_schema is not None:
        raise invalid_input(
            "`response_format` cannot be combined with tool calls; send tool_choice 'none' "
            "to get a JSON answer, or drop response_format."
        )
    callable_tools = [tool for tool in tools if choice in ("auto", "required", tool.name)]
    single = not parallel or choice not in ("auto", "required")
    calls_grammar = grammar_for(_calls_schema(callable_tools, single=single), "tools", ["name", "arguments"])
    schemas = {tool.name: tool.parameters for tool in callable_tools}
    if choice == "auto":
        renamed = re.sub(r"^root ::=", "tool-calls ::=", calls_grammar, count=1, flags=re.MULTILINE)
        grammar = f"root ::= tool-calls | {_TEXT_BRANCH}\n{renamed}"
        return OutputPlan(mode="auto", grammar=grammar, system_note=tools_note, tool_schemas=schemas)
    return OutputPlan(mode="tools", grammar=calls_grammar, system_note=tools_note, tool_schemas=schemas)


def parse_tools(raw: Any) -> list[Tool]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise invalid_input("`tools` must be a list.")
    tools: list[Tool] = []
    for index, item in enumerate(raw):
        where = f"tools[{index}]"
        if not isinstance(item, Mapping):
            raise invalid_input(f"{where} must be an object.")
        if item.get("type", "function") != "function":
            raise invalid_input(f"{where}.type must be 'function'; other tool types are not supported.")
        # The OpenAI shape nests the function; Workers AI's legacy shape is flat.
        function = item.get("function", item)
        if not isinstance(function, Mapping):
            raise invalid_input(f"{where}.function must be an object.")
        where = f"{where}.function" if "function" in item else where
        name = function.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise invalid_input(f"{where}.name must be 1-64 letters, digits, '_' or '-'; got {name!r}.")
        if any(tool.name == name for tool in tools):
            raise invalid_input(f"{where}.name {name!r} is used by more than one tool.")
        description = function.get("description") or ""
        if not isinstance(description, str):
            raise invalid_input(f"{where}.description must be a string.")
        parameters = function.get("parameters") or _EMPTY_PARAMETERS
        check_schema(parameters, f"{where}.parameters")
        if parameters.get("type", "object") != "object":
            raise invalid_input(f"{where}.parameters must describe an object (type 'object').")
        tools.append(Tool(name=name, description=description, parameters=dict(parameters)))
    return tools


def check_schema(schema: Any, where: str) -> None:
    if not isinstance(schema, dict):
        raise invalid_input(f"{where} must be a JSON Schema object.")
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise invalid_input(f"{where} is not a valid JSON Schema: {exc.message}.") from exc


def grammar_for(schema: Mapping[str, Any], where: str, prop_order: list[str] | None = None) -> str:
    """GBNF for `schema`, emitting compact, strictly valid JSON.

    Without optional whitespace the output re-serializes to the same text (so history
    rendered from it hits the prefix cache), and a tiny model cannot drift into padding.
    """
    try:
        gbnf = json_schema_to_gbnf(json.dumps(schema), prop_order=prop_order)
    except Exception as exc:  # the converter raises bare Exceptions, KeyErrors, ValueErrors...
        raise invalid_input(f"{where} uses a JSON Schema the grammar builder cannot handle: {exc}") from exc
    gbnf = re.sub(r"^space ::= .*$", 'space ::= ""', gbnf, flags=re.MULTILINE)
    # JSON strings may not hold raw control characters; the converter's `char` allows them.
    return gbnf.replace('char ::= [^"\\\\] |', 'char ::= [^"\\\\\\x7F\\x00-\\x1F] |', 1)


def _tool_choice(raw: Any, tools: list[Tool]) -> str:
    """'none', 'auto', 'required' or the name of the one tool that must be called."""
    if raw is None:
        return "auto" if tools else "none"
    if raw in ("none", "auto", "required"):
        if raw == "required" and not tools:
            raise invalid_input("tool_choice 'required' needs `tools`.")
        return str(raw)
    function = raw.get("function") if isinstance(raw, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(name, str):
        raise invalid_input(
            "`tool_choice` must be 'none', 'auto', 'required' or "
            "{'type': 'function', 'function': {'name': ...}}."
        )
    if not any(tool.name == name for tool in tools):
        raise invalid_input(f"tool_choice names {name!r}, which is not in `tools`.")
    return name


def _response_schema(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    kind = raw.get("type") if isinstance(raw, Mapping) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        spec = raw.get("json_schema")
        # OpenAI nests the schema under `schema`; Workers AI's legacy models take it bare.
        schema = spec.get("schema") if isinstance(spec, Mapping) and "schema" in spec else spec
        check_schema(schema, "response_format.json_schema")
        return dict(schema)  # type: ignore[arg-type]  # check_schema made sure it is a dict
    raise invalid_input(
        f"`response_format.type` must be 'text', 'json_object' or 'json_schema'; got {kind!r}."
    )


def _calls_schema(tools: list[Tool], *, single: bool) -> dict[str, Any]:
    """One JSON Schema for the whole answer: a list of {name, arguments} objects."""
    variants: list[dict[str, Any]] = []
    definitions: dict[str, Any] = {}
    for index, tool in enumerate(tools):
        parameters, hoisted = _hoist_definitions(tool.parameters, f"tool{index}-")
        definitions.update(hoisted)
        variants.append(
            {
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": parameters},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    schema: dict[str, Any] = {"type": "array", "minItems": 1, "items": {"anyOf": variants}}
    if single:
        schema["maxItems"] = 1
    if definitions:
        schema["$defs"] = definitions
    return schema


def _hoist_definitions(schema: dict[str, Any], prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Move a tool's local `$defs` to the combined schema's root, renaming its `$ref`s to match."""
    local = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    body = {key: value for key, value in schema.items() if key not in ("$defs", "definitions", "$schema")}

    def rewrite(node: Any) -> Any:
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        if not isinstance(node, Mapping):
            return node
        out = {key: rewrite(value) for key, value in node.items()}
        ref = node.get("$ref")
        if isinstance(ref, str):
            match = re.fullmatch(r"#/(?:\$defs|definitions)/(.+)", ref)
            if not match:
                raise invalid_input(f"Tool schemas may only use local $refs to $defs; got {ref!r}.")
            out["$ref"] = f"#/$defs/{prefix}{match.group(1)}"
        return out

    return rewrite(body), {f"{prefix}{name}": rewrite(value) for name, value in local.items()}


def _tools_note(tools: list[Tool]) -> str:
    if not tools:
        return ""
    lines = ["You can call these tools:"]
    for tool in tools:
        summary = f": {tool.description.strip().rstrip('.')}." if tool.description.strip() else ":"
        lines.append(f"- {tool.name}{summary} Arguments (JSON Schema): {json.dumps(tool.parameters)}")
    example = render_tool_calls([(tools[0].name, "{...}")])
    lines.append(f"To call tools, answer with only a JSON list of calls, like {example}")
    lines.append("Otherwise answer in plain text.")
    return "\n".join(lines)


def _json_note(schema: Mapping[str, Any]) -> str:
    return f"Answer with only JSON that follows this JSON Schema: {json.dumps(schema)}"
