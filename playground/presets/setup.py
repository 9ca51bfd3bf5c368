"""A preset's setup: the plain dataclass features read, and its JSON document (export and import).

`PresetSetup` is what a feature starts from: chat copies it onto a new conversation, batches
read its `request_preset()` (the `ChatRequest` fields every item carries), and a comparison can
read the same. The document is the setup as JSON, the one shape stored on a version, exported
and imported; `setup_document_problems` names every problem of one at its JSON path (a
`PresetInvalid` refuses it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError

from playground.presets.request_presets import RequestPreset
from playground.presets.variables import variables_problems, variables_read
from playground.providers.json_problems import Issue
from playground.providers.model_ids import model_id_validate
from playground.providers.request_rules import (
    JSON_OBJECT,
    JSON_SCHEMA,
    MAX_TOOLS,
    PARAMETERS,
    SCHEMA_NAME,
    TEXT,
    TOOL_CHOICES,
    schema_problems,
    tool_shape_problems,
    value_problem,
)

FORMAT = "playground-preset"
FORMAT_VERSION = 1
SYSTEM_PROMPT_MAX_CHARS = 20_000
DOCUMENT_MAX_CHARS = 500_000
MAX_MOCKS = 20
MAX_AUTO_MOCK_STEPS = 20
# Keys of ours on a tool, never sent upstream (the chat's tools editor keeps them too).
LOCAL_TOOL_KEYS = ("mocks", "returns_json")
PARAMETER_NAMES = {parameter.name: parameter for parameter in PARAMETERS}
# The fields of a setup, in the order the diff and the export show them.
FIELDS = (
    "connection",
    "model",
    "system_prompt",
    "variables",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "auto_mock_steps",
    "response_format",
    "parameters",
    "affinity",
)


@dataclass(frozen=True)
class ConnectionRef:
    """The connection a setup runs on: its id in the team (None once deleted, or in a file), and
    its name and kind, which is how a file names it."""

    id: int | None
    name: str
    kind: str


@dataclass(frozen=True)
class PresetSetup:
    connection: ConnectionRef
    model_id: str
    system_prompt: str = ""
    # Prompt variables, each {"name", "type", "value"}: the value is the default a conversation
    # (or a batch line, or a comparison) starts with (`presets.variables`).
    variables: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)  # with their mocks
    tool_choice: str | dict[str, Any] = "auto"
    parallel_tool_calls: bool = True
    auto_mock_steps: int = 0
    response_format: dict[str, Any] | None = None  # None: text
    parameters: dict[str, Any] = field(default_factory=dict)  # as the composer stores them
    use_affinity: bool = True
    # Which version this is (None for a setup not saved yet), and whose.
    team_id: int | None = None
    preset_id: int | None = None
    preset_name: str = ""
    version_id: int | None = None
    version_number: int | None = None

    def document(self) -> dict[str, Any]:
        """The setup as stored on a version and exported, in `FIELDS` order."""
        return {
            "connection": {"name": self.connection.name, "kind": self.connection.kind},
            "model": self.model_id,
            "system_prompt": self.system_prompt,
            "variables": self.variables,
            "tools": self.tools,
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "auto_mock_steps": self.auto_mock_steps,
            "response_format": self.response_format,
            "parameters": self.parameters,
            "affinity": self.use_affinity,
        }

    def request_preset(self) -> RequestPreset:
        """The request fields a batch's items carry (tools as sent: no mocks)."""
        fields: dict[str, Any] = {}
        if self.tools:
            fields["tools"] = [
                {key: value for key, value in tool.items() if key not in LOCAL_TOOL_KEYS}
                for tool in self.tools
            ]
            fields["tool_choice"] = self.tool_choice
            fields["parallel_tool_calls"] = self.parallel_tool_calls
        if self.response_format:
            fields["response_format"] = self.response_format
        return RequestPreset(
            id=self.version_id or 0,
            label=f"{self.preset_name} v{self.version_number}",
            system_prompt=self.system_prompt,
            variables=tuple(variables_read(self.variables)),
            parameters=dict(self.parameters),
            fields=fields,
        )


def setup_from_document(
    document: Mapping[str, Any], *, connection_id: int | None, **identity: Any
) -> PresetSetup:
    """A setup from a document with no `setup_document_problems` (or one stored on a version)."""
    connection = document["connection"]
    return PresetSetup(
        connection=ConnectionRef(id=connection_id, name=connection["name"], kind=connection["kind"]),
        model_id=document["model"],
        system_prompt=document.get("system_prompt", ""),
        variables=list(document.get("variables", [])),
        tools=list(document.get("tools", [])),
        tool_choice=document.get("tool_choice", "auto"),
        parallel_tool_calls=document.get("parallel_tool_calls", True),
        auto_mock_steps=document.get("auto_mock_steps", 0),
        response_format=document.get("response_format"),
        parameters=dict(document.get("parameters", {})),
        use_affinity=document.get("affinity", True),
        **identity,
    )


# --- the file ------------------------------------------------------------------------------


class PresetInvalid(ValidationError):
    """A preset file with problems; `problems` lists each at its JSON path."""

    def __init__(self, problems: list[Issue]) -> None:
        self.problems = problems
        super().__init__([f"{problem.path}: {problem.message}" for problem in problems])


def export_document(*, name: str, number: int, note: str, setup: PresetSetup) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "name": name,
        "version": number,
        "note": note,
        "setup": setup.document(),
    }


def export_text(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class ImportedPreset:
    name: str
    note: str
    document: dict[str, Any]  # the setup, checked


def preset_file_parse(text: str) -> ImportedPreset:
    """A file `export_document` wrote (or one written by hand to its shape), checked: raises
    `PresetInvalid` naming every problem at its JSON path."""
    if len(text) > DOCUMENT_MAX_CHARS:
        raise PresetInvalid([Issue("$", f"The file is over {DOCUMENT_MAX_CHARS:,} characters.")])
    if not text.strip():
        raise PresetInvalid([Issue("$", "Paste a preset's JSON or choose its file.")])
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise PresetInvalid([Issue("$", f"Not valid JSON: {exc}.")]) from None
    if not isinstance(data, dict):
        raise PresetInvalid(
            [Issue("$", 'A preset file is a JSON object: {"format": "playground-preset", ...}.')]
        )
    problems: list[Issue] = []
    if data.get("format") != FORMAT:
        problems.append(Issue("$.format", f'Must be "{FORMAT}" (this is not a preset file, or not ours).'))
    elif data.get("format_version") != FORMAT_VERSION:
        problems.append(Issue("$.format_version", f"This playground reads version {FORMAT_VERSION}."))
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append(Issue("$.name", "Required: the preset's name."))
    elif len(name.strip()) > 120:
        problems.append(Issue("$.name", "At most 120 characters."))
    note = data.get("note", "")
    if not isinstance(note, str):
        problems.append(Issue("$.note", "Must be text."))
    setup = data.get("setup")
    if not isinstance(setup, dict):
        problems.append(
            Issue("$.setup", "Required: an object with the connection, model, prompt and settings.")
        )
    else:
        problems += setup_document_problems(setup)
    if problems:
        raise PresetInvalid(problems)
    assert isinstance(name, str) and isinstance(setup, dict)
    return ImportedPreset(name=name.strip(), note=str(note)[:200], document=_with_defaults(setup))


def _with_defaults(setup: dict[str, Any]) -> dict[str, Any]:
    """The document in `FIELDS` order with every optional field present."""
    response_format = setup.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == TEXT:
        response_format = None
    return {
        "connection": {"name": setup["connection"]["name"], "kind": setup["connection"]["kind"]},
        "model": setup["model"].strip(),
        "system_prompt": setup.get("system_prompt", ""),
        "variables": [{"type": "text", "value": "", **row} for row in setup.get("variables", [])],
        "tools": setup.get("tools", []),
        "tool_choice": setup.get("tool_choice", "auto"),
        "parallel_tool_calls": setup.get("parallel_tool_calls", True),
        "auto_mock_steps": setup.get("auto_mock_steps", 0),
        "response_format": response_format,
        "parameters": {
            name: value for name, value in setup.get("parameters", {}).items() if value is not None
        },
        "affinity": setup.get("affinity", True),
    }


def setup_document_problems(setup: Mapping[str, Any]) -> list[Issue]:
    """Every problem of a setup document, each at its JSON path under `$.setup`."""
    at = "$.setup"
    problems = [
        Issue(f"{at}.{key}", f"Unknown field; a setup has {', '.join(FIELDS)}.")
        for key in setup
        if key not in FIELDS
    ]
    connection = setup.get("connection")
    if not (
        isinstance(connection, dict)
        and isinstance(connection.get("name"), str)
        and connection["name"].strip()
    ):
        problems.append(
            Issue(f"{at}.connection", 'Required: {"name": "...", "kind": "..."}, the connection to run on.')
        )
    elif not isinstance(connection.get("kind", ""), str):
        problems.append(Issue(f"{at}.connection.kind", "Must be text."))
    problems += _model_problems(setup.get("model"), f"{at}.model")
    prompt = setup.get("system_prompt", "")
    if not isinstance(prompt, str):
        problems.append(Issue(f"{at}.system_prompt", "Must be text."))
    elif len(prompt) > SYSTEM_PROMPT_MAX_CHARS:
        problems.append(Issue(f"{at}.system_prompt", f"At most {SYSTEM_PROMPT_MAX_CHARS:,} characters."))
    problems += variables_problems(setup.get("variables", []), f"{at}.variables")
    tools = setup.get("tools", [])
    problems += _tools_problems(tools, f"{at}.tools")
    problems += _tool_choice_problems(setup.get("tool_choice", "auto"), tools, f"{at}.tool_choice")
    if not isinstance(setup.get("parallel_tool_calls", True), bool):
        problems.append(Issue(f"{at}.parallel_tool_calls", "Must be true or false."))
    steps = setup.get("auto_mock_steps", 0)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 0 <= steps <= MAX_AUTO_MOCK_STEPS:
        problems.append(Issue(f"{at}.auto_mock_steps", f"A whole number from 0 to {MAX_AUTO_MOCK_STEPS}."))
    problems += _response_format_problems(setup.get("response_format"), f"{at}.response_format")
    problems += _parameter_problems(setup.get("parameters", {}), f"{at}.parameters")
    if not isinstance(setup.get("affinity", True), bool):
        problems.append(Issue(f"{at}.affinity", "Must be true or false."))
    return problems


def _model_problems(model: Any, path: str) -> list[Issue]:
    if not isinstance(model, str) or not model.strip():
        return [Issue(path, "Required: the model id.")]
    try:
        model_id_validate(model.strip())
    except ValidationError as exc:
        return [Issue(path, " ".join(exc.messages))]
    return []


def _tools_problems(tools: Any, path: str) -> list[Issue]:
    if not isinstance(tools, list):
        return [Issue(path, "Must be an array of tools.")]
    if len(tools) > MAX_TOOLS:
        return [Issue(path, f"At most {MAX_TOOLS} tools.")]
    problems: list[Issue] = []
    names: set[str] = set()
    for index, tool in enumerate(tools):
        where = f"{path}[{index}]"
        problems += tool_shape_problems(tool, where, names, extra_keys=LOCAL_TOOL_KEYS)
        if isinstance(tool, dict):
            mocks = tool.get("mocks", [])
            if not isinstance(mocks, list) or len(mocks) > MAX_MOCKS:
                problems.append(Issue(f"{where}.mocks", f"An array of at most {MAX_MOCKS} results."))
            if not isinstance(tool.get("returns_json", False), bool):
                problems.append(Issue(f"{where}.returns_json", "Must be true or false."))
    return problems


def _tool_choice_problems(choice: Any, tools: Any, path: str) -> list[Issue]:
    names = {
        tool["function"].get("name")
        for tool in (tools if isinstance(tools, list) else [])
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict)
    }
    if isinstance(choice, str):
        if choice not in TOOL_CHOICES:
            return [Issue(path, f"One of {', '.join(TOOL_CHOICES)}, or a tool named in an object.")]
        if choice == "required" and not names:
            return [Issue(path, '"required" needs at least one tool.')]
        return []
    function = choice.get("function") if isinstance(choice, dict) else None
    if not (isinstance(choice, dict) and choice.get("type") == "function" and isinstance(function, dict)):
        return [
            Issue(path, 'One of auto, none, required, or {"type": "function", "function": {"name": ...}}.')
        ]
    if function.get("name") not in names:
        return [Issue(f"{path}.function.name", f"There is no tool named {function.get('name')!r}.")]
    return []


def _response_format_problems(value: Any, path: str) -> list[Issue]:
    if value is None:
        return []
    kind = value.get("type") if isinstance(value, dict) else None
    if kind in (TEXT, JSON_OBJECT):
        return []
    if kind != JSON_SCHEMA:
        return [
            Issue(
                path, 'null (text), {"type": "json_object"} or {"type": "json_schema", "json_schema": {...}}.'
            )
        ]
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        return [Issue(f"{path}.json_schema", "Required: {name, strict, schema}.")]
    problems = []
    if not isinstance(spec.get("name"), str) or not SCHEMA_NAME.fullmatch(spec["name"]):
        problems.append(Issue(f"{path}.json_schema.name", "A name of 1 to 64 letters, digits, _ or -."))
    if not isinstance(spec.get("strict", False), bool):
        problems.append(Issue(f"{path}.json_schema.strict", "Must be true or false."))
    problems += schema_problems(spec.get("schema"), f"{path}.json_schema.schema")
    return problems


def _parameter_problems(parameters: Any, path: str) -> list[Issue]:
    if not isinstance(parameters, dict):
        return [Issue(path, "Must be an object of parameters.")]
    problems = []
    for name, value in parameters.items():
        parameter = PARAMETER_NAMES.get(name)
        where = f"{path}.{name}"
        if parameter is None:
            problems.append(Issue(where, f"Unknown parameter; known: {', '.join(PARAMETER_NAMES)}."))
        elif value is None:
            continue
        elif name == "thinking":
            if not isinstance(value, bool):
                problems.append(Issue(where, "Must be true or false."))
        elif problem := value_problem(parameter.wire, value, max_tokens_limit=None):
            problems.append(Issue(where, problem))
    return problems
