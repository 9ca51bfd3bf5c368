"""What a request may carry, for a connection kind and a model: one set of rules for every feature.

The chat composer offers these controls (disabled with the reason where they do not apply)
and the batch pre-check refuses a line that breaks them, so a value the composer would not
let through never reaches an upstream from a batch either:
- a parameter the connection's kind does not take (`KindSpec.parameters`) is unavailable;
- reasoning controls only where the catalogue says the model reasons; the thinking switch
  goes in `chat_template_kwargs` under the name the serving model reads
  (docs/reference/workers-ai-api.md §1.2:
  Kimi K2.5 reads `enable_thinking`, K2.6 `thinking`; K2.5 is served as K2.6 from
  2026-05-30, so the model serving on the day decides);
- `json_schema` output only where the catalogue says `supports_json_schema`; tools only
  where it does not say the model takes none;
- numbers within the ranges below (the engine and the OpenAI API refuse the same ones),
  `max_tokens` within the model's context window on the connection when it is known
  (`context_windows`: as served, else the catalogue's);
- tool definitions in the OpenAI shape with JSON Schema 2020-12 parameters.

Functions over the catalogue (and the windows the connection serves); nothing here writes. It
sits on the providers floor because both the chat and the batch features read it (features
never import each other).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils import timezone
from jsonschema import Draft202012Validator

from playground.catalog.models import CatalogModel
from playground.catalog.seed import KIMI_K25, KIMI_K26
from playground.catalog.selectors import catalog_model_serving
from playground.providers.context_windows import ContextWindow, context_window_for
from playground.providers.json_problems import Issue
from playground.providers.kinds import KindSpec
from playground.providers.models import ProviderConnection

TEXT, JSON_OBJECT, JSON_SCHEMA = "text", "json_object", "json_schema"
RESPONSE_FORMATS = (TEXT, JSON_OBJECT, JSON_SCHEMA)
REASONING_EFFORTS = ("low", "medium", "high")
SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
STOP_SEQUENCES_MAX = 4
STOP_SEQUENCE_MAX_CHARS = 100
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_TOOLS = 128  # what OpenAI accepts
TOOL_CHOICES = ("auto", "none", "required")
FUNCTION_KEYS = ("name", "description", "parameters", "strict")
_META = Draft202012Validator(
    Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
)

# The `chat_template_kwargs` field that switches thinking, by the model serving the request.
# A reasoning model missing here has no switch (GPT-OSS always reasons; set its effort).
THINKING_FIELDS = {
    KIMI_K25: "enable_thinking",
    KIMI_K26: "thinking",
    "@cf/moonshotai/kimi-k2.7-code": "thinking",  # the K2.6 API
    "@cf/qwen/qwen3-30b-a3b-fp8": "enable_thinking",
    "@cf/zai-org/glm-4.7-flash": "enable_thinking",
}


@dataclass(frozen=True)
class Range:
    low: int
    high: int
    whole: bool = False  # whole numbers only (else any finite number within the bounds)

    def text(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        return f"{kind} from {self.low:,} to {self.high:,}"

    def holds(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.whole and not isinstance(value, int):
            return False
        return math.isfinite(value) and self.low <= value <= self.high


# By the request field they go out as.
RANGES = {
    "temperature": Range(0, 2),
    "top_p": Range(0, 1),
    "max_tokens": Range(1, 1_000_000, whole=True),
    "seed": Range(0, 2**32 - 1, whole=True),
    "presence_penalty": Range(-2, 2),
    "frequency_penalty": Range(-2, 2),
}


@dataclass(frozen=True)
class Parameter:
    name: str  # the key in Conversation.parameters and the composer's form field
    label: str
    wire: str  # the request field it goes out as (checked against KindSpec.parameters)
    reasoning: bool = False
    help: str = ""


PARAMETERS = (
    Parameter("temperature", "Temperature", "temperature", help="0 to 2; higher is more random."),
    Parameter("top_p", "Top p", "top_p", help="0 to 1; sample from the smallest set of tokens this likely."),
    Parameter("max_tokens", "Max tokens", "max_tokens", help="The most tokens the answer may have."),
    Parameter("seed", "Seed", "seed", help="The same seed and prompt give the same answer, where supported."),
    Parameter("stop", "Stop sequences", "stop", help="One per line, at most 4: the answer ends before any."),
    Parameter(
        "presence_penalty",
        "Presence penalty",
        "presence_penalty",
        help="-2 to 2; above 0 favours new topics.",
    ),
    Parameter(
        "frequency_penalty", "Frequency penalty", "frequency_penalty", help="-2 to 2; above 0 repeats less."
    ),
    Parameter(
        "reasoning_effort",
        "Reasoning effort",
        "reasoning_effort",
        reasoning=True,
        help="How much the model thinks before it answers.",
    ),
    Parameter(
        "thinking",
        "Thinking",
        "chat_template_kwargs",
        reasoning=True,
        help="Switch the model's thinking on or off (sent in chat_template_kwargs).",
    ),
)
PARAMETERS_BY_WIRE = {parameter.wire: parameter for parameter in PARAMETERS}


@dataclass(frozen=True)
class Control:
    parameter: Parameter
    available: bool
    reason: str = ""  # why it is disabled

    @property
    def name(self) -> str:
        return self.parameter.name


@dataclass(frozen=True)
class ToolSupport:
    allowed: bool
    reason: str  # why not (or a caveat when the catalogue does not know the model)


@dataclass(frozen=True)
class Capabilities:
    """What a request on one connection kind and model may carry, and why not where it may not."""

    controls: dict[str, Control]
    model: CatalogModel | None  # the catalogue's entry for the model serving that day, if any
    json_schema: bool
    json_schema_reason: str
    streams_json: bool  # False: JSON answers are requested with stream false
    thinking_field: str  # "" when the model has no thinking switch
    window: ContextWindow | None  # the model's context window on the connection, when known
    tools: ToolSupport

    @property
    def max_tokens_limit(self) -> int | None:
        return self.window.tokens if self.window is not None else None

    @property
    def stream_note(self) -> str:
        if self.streams_json:
            return ""
        name = self.model.display_name if self.model else "This model"
        return (
            f"{name} cannot stream JSON output on this connection (Workers AI refuses it with error "
            "5023), so JSON answers are requested whole (stream false) and appear at once."
        )

    def available(self, name: str) -> bool:
        return self.controls[name].available


def request_capabilities(*, connection: ProviderConnection, model_id: str, day: dt.date) -> Capabilities:
    """What a request to `model_id` on `connection` may carry (blocking: the engine may be asked
    its window)."""
    spec = connection.spec
    model = catalog_model_serving(model_id=model_id, day=day)
    thinking_field = THINKING_FIELDS.get(model.model_id, "") if model is not None else ""
    controls = {
        parameter.name: _control(parameter, spec=spec, model=model, thinking_field=thinking_field)
        for parameter in PARAMETERS
    }
    json_schema, json_schema_reason = _json_schema_gate(model_id, model)
    streams = spec.streams_json_schema
    if streams is None:
        streams = model is not None and model.supports_json_schema_streaming
    return Capabilities(
        controls=controls,
        model=model,
        json_schema=json_schema,
        json_schema_reason=json_schema_reason,
        streams_json=streams,
        thinking_field=thinking_field,
        window=context_window_for(connection=connection, model_id=model_id, day=day),
        tools=_tool_support(model),
    )


def capabilities_unavailable(*, reason: str, model: CatalogModel | None) -> Capabilities:
    """Every control off with `reason` (e.g. the connection was deleted)."""
    return Capabilities(
        controls={p.name: Control(p, False, reason) for p in PARAMETERS},
        model=model,
        json_schema=False,
        json_schema_reason=reason,
        streams_json=True,
        thinking_field="",
        window=None,
        tools=ToolSupport(False, reason),
    )


def _control(
    parameter: Parameter, *, spec: KindSpec, model: CatalogModel | None, thinking_field: str
) -> Control:
    if parameter.wire not in spec.parameters:
        return Control(parameter, False, f"{spec.label} connections do not take {parameter.label.lower()}.")
    if not parameter.reasoning:
        return Control(parameter, True)
    if model is None:
        return Control(
            parameter, False, "The catalogue does not list this model, so it is not known to reason."
        )
    if not model.supports_reasoning:
        return Control(parameter, False, f"{model.display_name} does not reason.")
    if parameter.name == "thinking" and not thinking_field:
        return Control(
            parameter, False, f"{model.display_name} has no thinking switch; set its effort instead."
        )
    return Control(parameter, True)


def _json_schema_gate(model_id: str, model: CatalogModel | None) -> tuple[bool, str]:
    if model is None:
        return False, (
            f"The catalogue does not list {model_id}: JSON-schema output is offered only for models "
            "it says can follow a schema."
        )
    if not model.supports_json_schema:
        return False, f"{model.display_name} cannot follow a JSON schema (per the catalogue)."
    return True, ""


def tools_support(*, model_id: str) -> ToolSupport:
    """Whether the catalogue says the model serving today takes tools."""
    return _tool_support(catalog_model_serving(model_id=model_id, day=timezone.now().date()))


def _tool_support(model: CatalogModel | None) -> ToolSupport:
    if model is None:
        return ToolSupport(True, "The catalogue does not know this model: tools are sent as defined.")
    if not model.supports_tools:
        return ToolSupport(False, f"{model.display_name} does not support tool calling (per the catalogue).")
    return ToolSupport(True, "")


# --- values --------------------------------------------------------------------------------


def value_problem(wire: str, value: Any, *, max_tokens_limit: int | None) -> str:
    """Why `value` cannot go out as the request field `wire` ("" when it can)."""
    limit = RANGES.get(wire)
    if limit is not None and not limit.holds(value):
        return f"`{wire}` must be {limit.text()}; got {_short(value)}."
    if wire == "max_tokens" and max_tokens_limit is not None and value > max_tokens_limit:
        return f"`max_tokens` is {value:,}; at most {max_tokens_limit:,}: the model's context window."
    if wire == "stop":
        stops = [value] if isinstance(value, str) else value
        if not (isinstance(stops, list) and all(isinstance(s, str) and s for s in stops)):
            return "`stop` must be non-empty text or a list of non-empty texts."
        if len(stops) > STOP_SEQUENCES_MAX:
            return f"`stop` has {len(stops)} sequences; at most {STOP_SEQUENCES_MAX}."
        if any(len(s) > STOP_SEQUENCE_MAX_CHARS for s in stops):
            return f"a stop sequence can be at most {STOP_SEQUENCE_MAX_CHARS} characters."
    if wire == "reasoning_effort" and value not in REASONING_EFFORTS:
        return f"`reasoning_effort` must be one of {', '.join(REASONING_EFFORTS)}; got {_short(value)}."
    if wire == "chat_template_kwargs" and not isinstance(value, dict):
        return "`chat_template_kwargs` must be an object."
    return ""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --- tools and schemas -----------------------------------------------------------------------


def tool_shape_problems(
    tool: Any, path: str, names: set[str], *, extra_keys: Sequence[str] = ()
) -> list[Issue]:
    """Each way one tool definition breaks the OpenAI shape; `names` collects the names seen.

    `extra_keys`: keys of the caller's own allowed on the tool besides `type` and `function`.
    """
    keys = ("type", "function", *extra_keys)
    if not isinstance(tool, dict):
        return [Issue(path, 'A tool must be an object: {"type": "function", "function": {...}}.')]
    problems = [
        Issue(f"{path}.{key}", f"Unknown key {key!r}; a tool has {', '.join(keys)}.")
        for key in tool
        if key not in keys
    ]
    if tool.get("type") != "function":
        problems.append(Issue(f"{path}.type", 'Must be "function".'))
    function = tool.get("function")
    if not isinstance(function, dict):
        problems.append(Issue(f"{path}.function", "Required: an object with name, description, parameters."))
        return problems
    where = f"{path}.function"
    problems += [
        Issue(f"{where}.{key}", f"Unknown key {key!r}; a function has {', '.join(FUNCTION_KEYS)}.")
        for key in function
        if key not in FUNCTION_KEYS
    ]
    name = function.get("name")
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        problems.append(Issue(f"{where}.name", "Required: 1-64 letters, digits, '_' or '-'."))
    elif name in names:
        problems.append(Issue(f"{where}.name", f"Another tool is already named {name!r}."))
    else:
        names.add(name)
    if "description" in function and not isinstance(function["description"], str):
        problems.append(Issue(f"{where}.description", "Must be a string."))
    if "strict" in function and not isinstance(function["strict"], bool | None):
        problems.append(Issue(f"{where}.strict", "Must be true, false or null."))
    if "parameters" in function:
        problems += schema_problems(function["parameters"], f"{where}.parameters", root_object=True)
    return problems


def schema_problems(schema: Any, path: str, *, root_object: bool = False) -> list[Issue]:
    """Each way `schema` breaks the JSON Schema 2020-12 meta-schema, with its path."""
    if not isinstance(schema, dict):
        return [Issue(path, "Must be a JSON Schema object.")]
    problems = [
        Issue(path + _suffix(error.json_path), f"Not valid JSON Schema 2020-12: {error.message}.")
        for error in sorted(_META.iter_errors(schema), key=lambda error: error.json_path)
    ]
    if root_object and not problems and schema.get("type", "object") != "object":
        problems.append(Issue(f"{path}.type", 'Tool parameters must describe an object ("type": "object").'))
    return problems


def _suffix(json_path: str) -> str:
    """jsonschema's "$.properties.x" as a suffix: ".properties.x"."""
    return json_path[1:] if json_path.startswith("$") else json_path


# --- a request body as sent ------------------------------------------------------------------

TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls")


def request_fields_problem(body: Mapping[str, Any], caps: Capabilities) -> str:
    """The first reason a request body's fields (as they go upstream) break the rules, or "".

    For bodies the user wrote in the wire format (a batch line): parameters by their request
    field name, tools, tool choice and response format. `messages` are the caller's to check.
    """
    for key, value in body.items():
        parameter = PARAMETERS_BY_WIRE.get(key)
        if parameter is None:
            continue
        control = caps.controls[parameter.name]
        if not control.available:
            return f"`{key}`: {control.reason}"
        problem = value_problem(key, value, max_tokens_limit=caps.max_tokens_limit)
        if problem:
            return problem
    return _tools_problem(body, caps) or _response_format_problem(body.get("response_format"), caps)


def _tools_problem(body: Mapping[str, Any], caps: Capabilities) -> str:
    tools = body.get("tools")
    if tools is not None:
        if not caps.tools.allowed:
            return f"`tools`: {caps.tools.reason}"
        if not isinstance(tools, list) or not tools:
            return '`tools` must be a non-empty list of {"type": "function", "function": {...}} objects.'
        if len(tools) > MAX_TOOLS:
            return f"`tools` has {len(tools)} tools; at most {MAX_TOOLS}."
        names: set[str] = set()
        for index, tool in enumerate(tools):
            problems = tool_shape_problems(tool, f"tools[{index}]", names)
            if problems:
                return f"`{problems[0].path}`: {problems[0].message}"
    choice = body.get("tool_choice")
    if choice is not None:
        named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
        if choice not in TOOL_CHOICES and not isinstance(named, str):
            return (
                f"`tool_choice` must be one of {', '.join(TOOL_CHOICES)} or "
                '{"type": "function", "function": {"name": ...}}.'
            )
        defined = {tool["function"]["name"] for tool in tools or []}
        if choice == "required" and not defined:
            return '`tool_choice` "required" needs `tools`.'
        if named is not None and named not in defined:
            return f"`tool_choice` names {named!r}, which is not in `tools`."
    if "parallel_tool_calls" in body and not isinstance(body["parallel_tool_calls"], bool):
        return "`parallel_tool_calls` must be true or false."
    return ""


def _response_format_problem(response_format: Any, caps: Capabilities) -> str:
    if response_format is None:
        return ""
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind not in RESPONSE_FORMATS:
        return f"`response_format` must be an object whose `type` is one of {', '.join(RESPONSE_FORMATS)}."
    if kind != JSON_SCHEMA:
        return ""
    if not caps.json_schema:
        return f"`response_format`: {caps.json_schema_reason}"
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        return "`response_format.json_schema` must be an object with `name` and `schema`."
    if "name" in spec and not (isinstance(spec["name"], str) and SCHEMA_NAME.fullmatch(spec["name"])):
        return "`response_format.json_schema.name` must be 1 to 64 letters, digits, _ or -."
    # OpenAI nests the schema under `schema`; Workers AI's legacy models take it bare.
    schema = spec.get("schema", spec)
    problems = schema_problems(schema, "response_format.json_schema.schema")
    return f"`{problems[0].path}`: {problems[0].message}" if problems else ""
