"""Function tools of a conversation: the definitions, the calls the model makes, the results.

Definitions are kept on `Conversation.tools` in the OpenAI shape
(`{"type": "function", "function": {"name", "description", "parameters", "strict"}}`) plus
two keys of ours that are never sent upstream: `mocks` (saved results the user can pick, and
that auto-mock mode answers with) and `returns_json` (a typed result must then be JSON).
Pure checks and shaping, no writes (`chat.services.conversations.conversation_tools_update` saves). Every
definition is checked on save by the shape rules every feature shares
(`providers.request_rules`: `parameters` against the JSON Schema 2020-12 meta-schema) plus
the mocks, and each problem is reported with its JSON path; nothing invalid is stored.

A call the model makes is stored on its assistant message, keyed by its index (Kimi's ids
repeat, so the id is only kept to send back), with whether its arguments validate against
the tool's `parameters`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaViolation

from playground.chat.models import Conversation
from playground.lib.storable import is_storable
from playground.providers.answer_collector import ToolCall
from playground.providers.json_problems import Issue
from playground.providers.request_rules import MAX_TOOLS, TOOL_CHOICES, tool_shape_problems, tools_support
from playground.usage.metering import estimate_tokens

MAX_TOOLS_CHARS = 200_000
MAX_MOCKS = 20
MAX_AUTO_MOCK_STEPS = 20
MAX_RESULT_CHARS = 100_000
# Keys of ours on a stored tool: kept for the editor, never sent upstream.
LOCAL_KEYS = ("mocks", "returns_json")


class ToolsInvalid(ValidationError):
    """The definitions (or the tool choice) have problems; `problems` lists each with its path."""

    def __init__(self, problems: Sequence[Issue]) -> None:
        self.problems = list(problems)
        super().__init__([f"{problem.path}: {problem.message}" for problem in self.problems])


# --- definitions --------------------------------------------------------------------------


def tools_parse(text: str) -> list[dict[str, Any]]:
    """The tool list typed in the editor, checked; raises `ToolsInvalid` with every problem."""
    text = text.strip()
    if not text:
        return []
    if len(text) > MAX_TOOLS_CHARS:
        raise ToolsInvalid([Issue("$", f"The definitions are over {MAX_TOOLS_CHARS:,} characters.")])
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise ToolsInvalid([Issue("$", f"Not valid JSON: {exc}.")]) from None
    problems = tools_validate(value)
    if problems:
        raise ToolsInvalid(problems)
    return value  # type: ignore[no-any-return]  # tools_validate checked it is a list of objects


def tools_validate(value: Any) -> list[Issue]:
    """Every problem of a decoded tool list: the OpenAI shape, names, schemas, mocks."""
    if not isinstance(value, list):
        return [Issue("$", "Tools must be a JSON array of tool objects.")]
    if len(value) > MAX_TOOLS:
        return [Issue("$", f"At most {MAX_TOOLS} tools.")]
    problems: list[Issue] = []
    names: set[str] = set()
    for index, tool in enumerate(value):
        path = f"$[{index}]"
        problems += tool_shape_problems(tool, path, names, extra_keys=LOCAL_KEYS)
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
            returns_json = tool.get("returns_json", False)
            if not isinstance(returns_json, bool):
                problems.append(Issue(f"{path}.returns_json", "Must be true or false."))
            mocks = tool.get("mocks", [])
            problems += _mock_problems(mocks, f"{path}.mocks", returns_json=returns_json is True)
    return problems


def _mock_problems(mocks: Any, path: str, *, returns_json: bool) -> list[Issue]:
    if not isinstance(mocks, list):
        return [Issue(path, "Mocks must be an array of results (text, or any JSON value).")]
    if len(mocks) > MAX_MOCKS:
        return [Issue(path, f"At most {MAX_MOCKS} mocks per tool.")]
    problems = []
    for index, mock in enumerate(mocks):
        if returns_json and isinstance(mock, str) and not _is_json(mock):
            problems.append(Issue(f"{path}[{index}]", "This tool returns JSON, and this text is not JSON."))
    return problems


def tools_upstream(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The definitions as sent: without our own keys (mocks, returns_json)."""
    return [{key: value for key, value in tool.items() if key not in LOCAL_KEYS} for tool in tools]


def tools_token_estimate(tools: Sequence[Mapping[str, Any]]) -> int:
    """Prompt tokens the definitions add to every request: an estimate, by the meter's rule
    (about 4 characters of the JSON sent per token); models also wrap them in a template."""
    if not tools:
        return 0
    return estimate_tokens(len(json.dumps(tools_upstream(tools))))


def tool_by_name(tools: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    return next((tool for tool in tools if tool.get("function", {}).get("name") == name), None)


def tool_choice_parse(raw: str, tools: Sequence[Mapping[str, Any]]) -> str | dict[str, Any]:
    """auto / none / required, or the name of a tool that must exist (stored as OpenAI's object)."""
    raw = raw.strip() or "auto"
    if raw in TOOL_CHOICES:
        if raw == "required" and not tools:
            raise ToolsInvalid([Issue("tool_choice", '"required" needs at least one tool.')])
        return raw
    if tool_by_name(tools, raw) is None:
        raise ToolsInvalid([Issue("tool_choice", f"There is no tool named {raw!r}.")])
    return {"type": "function", "function": {"name": raw}}


def tool_choice_name(choice: Any) -> str:
    """The editor's value for a stored tool choice."""
    if isinstance(choice, dict):
        return str(choice.get("function", {}).get("name", "auto"))
    return str(choice or "auto")


def tools_request_fields(conversation: Conversation) -> dict[str, Any]:
    """`ChatRequest` fields for the conversation's tools (none without tools).

    Raises `ValidationError` when the catalogue says the model takes no tools: the server
    never sends them, whatever the page did.
    """
    if not conversation.tools:
        return {}
    support = tools_support(model_id=conversation.model_id)
    if not support.allowed:
        raise ValidationError(f"{support.reason} Remove this conversation's tools to send messages.")
    return {
        "tools": tools_upstream(conversation.tools),
        "tool_choice": conversation.tool_choice or "auto",
        "parallel_tool_calls": conversation.parallel_tool_calls,
    }


# --- calls and results -----------------------------------------------------------------------


class ToolCallProblem(TypedDict):
    path: str  # JSON path into the arguments ("$" for the call as a whole)
    message: str


class ToolCallRecord(TypedDict):
    """One call as stored in `Message.tool_calls`."""

    index: int
    id: str
    name: str
    arguments: str  # JSON text, as the model wrote it ("{}" when it wrote none)
    valid: bool
    errors: list[ToolCallProblem]


def tool_call_record(call: ToolCall, tools: Sequence[Mapping[str, Any]]) -> ToolCallRecord:
    """What is stored on the assistant message for one call, with its validation.

    A call without an id (some native replies) gets one made from its index, since a tool
    result must name the call it answers.
    """
    errors: list[ToolCallProblem] = []
    tool = tool_by_name(tools, call.name)
    arguments, why_not = call.parsed_arguments()
    if tool is None:
        errors.append(
            {"path": "$", "message": f"The model called {call.name!r}, which is not a defined tool."}
        )
    elif why_not:
        errors.append({"path": "$", "message": why_not})
    else:
        schema = tool.get("function", {}).get("parameters") or {"type": "object"}
        errors += [
            {"path": error.json_path, "message": error.message}
            for error in sorted(Draft202012Validator(schema).iter_errors(arguments), key=_error_order)
        ]
    return {
        "index": call.index,
        "id": call.id or f"call_{call.index}",
        "name": call.name,
        "arguments": call.arguments or "{}",
        "valid": not errors,
        "errors": errors,
    }


def tool_result_content(*, text: str, mock: int | None, tool: Mapping[str, Any] | None) -> str:
    """The content of a tool message: a saved mock, or what the user typed.

    Raises `ValidationError` for a missing result, an unknown mock, or text that is not JSON
    when the tool returns JSON.
    """
    if mock is not None:
        mocks = tool.get("mocks", []) if tool is not None else []
        if not 0 <= mock < len(mocks):
            raise ValidationError("That mock result no longer exists; pick another or type a result.")
        return mock_text(mocks[mock])
    if not text.strip():
        raise ValidationError("Type a result or pick a mock.")
    if len(text) > MAX_RESULT_CHARS:
        raise ValidationError(f"A result can be at most {MAX_RESULT_CHARS:,} characters.")
    if not is_storable(text):
        raise ValidationError(
            "The result contains a character that cannot be stored (a lone surrogate or NUL)."
        )
    if tool is not None and tool.get("returns_json") and not _is_json(text):
        raise ValidationError("This tool returns JSON, and this result is not valid JSON.")
    return text


def mock_text(mock: Any) -> str:
    """A mock as a tool message's content: text as is, any other JSON value encoded."""
    return mock if isinstance(mock, str) else json.dumps(mock)


def _is_json(text: str) -> bool:
    try:
        json.loads(text, parse_constant=_refuse_constant)
    except ValueError:
        return False
    return True


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _error_order(error: SchemaViolation) -> str:
    return error.json_path
