"""The composer: which controls a conversation's model and connection take, and the request.

The one place that turns a conversation's settings (sampling and reasoning parameters,
response format; tools join here) into the `ChatRequest` of a turn, and the one place that
knows which of those settings a conversation may use:
- a parameter its connection's kind does not take (`KindSpec.parameters`) is disabled on
  the page with the reason, refused when saved, and never sent even if it was stored;
- reasoning controls only where the catalogue says the model reasons; the thinking switch
  goes in `chat_template_kwargs` under the name the serving model reads (reference §1.2:
  Kimi K2.5 reads `enable_thinking`, K2.6 `thinking`; K2.5 is served as K2.6 from
  2026-05-30, so the model serving on the day decides);
- `json_schema` output only where the catalogue says `supports_json_schema`; when neither
  the kind nor the model can stream JSON output (Workers AI answers 5023 to
  `response_format` with `stream: true`), the request goes out with `stream: false`.

Pure functions over a conversation and the catalogue; nothing here writes.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaViolation

from playground.catalog.models import CatalogModel
from playground.catalog.seed import KIMI_K25, KIMI_K26
from playground.catalog.selectors import catalog_model_serving
from playground.chat.issues import Issue, json_path
from playground.chat.models import Conversation
from playground.chat.tools import tools_request_fields
from playground.providers.adapters import ChatRequest
from playground.providers.kinds import KindSpec, WireFormat

TEXT, JSON_OBJECT, JSON_SCHEMA = "text", "json_object", "json_schema"
RESPONSE_FORMATS = (TEXT, JSON_OBJECT, JSON_SCHEMA)
REASONING_EFFORTS = ("low", "medium", "high")
MAX_ERRORS_SHOWN = 20
SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SCHEMA_MAX_CHARS = 50_000

# The `chat_template_kwargs` field that switches thinking, by the model serving the request.
# A reasoning model missing here has no switch (GPT-OSS always reasons; set its effort).
THINKING_FIELDS = {
    KIMI_K25: "enable_thinking",
    KIMI_K26: "thinking",
    "@cf/moonshotai/kimi-k2.7-code": "thinking",  # the K2.6 API
    "@cf/qwen/qwen3-30b-a3b-fp8": "enable_thinking",
    "@cf/zai-org/glm-4.7-flash": "enable_thinking",
}
# Legacy Workers AI models read a bare JSON Schema in `response_format.json_schema` rather
# than OpenAI's {name, schema, strict} envelope (reference §4.2).
BARE_SCHEMA_MODELS = frozenset({"@cf/meta/llama-3.3-70b-instruct-fp8-fast"})


@dataclass(frozen=True)
class Parameter:
    name: str  # the key in Conversation.parameters and the form field
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
PARAMETERS_BY_NAME = {parameter.name: parameter for parameter in PARAMETERS}


@dataclass(frozen=True)
class Control:
    parameter: Parameter
    available: bool
    reason: str = ""  # why it is disabled

    @property
    def name(self) -> str:
        return self.parameter.name


@dataclass(frozen=True)
class Capabilities:
    """What one conversation's composer offers, and why not where it does not."""

    controls: dict[str, Control]
    model: CatalogModel | None  # the catalogue's entry for the model serving today, if any
    json_schema: bool
    json_schema_reason: str
    streams_json: bool  # False: JSON answers are requested with stream false
    thinking_field: str  # "" when the model has no thinking switch
    max_tokens_limit: int | None  # the model's context window, when the catalogue knows it

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


def composer_capabilities(*, conversation: Conversation, day: dt.date) -> Capabilities:
    connection = conversation.connection
    model = catalog_model_serving(model_id=conversation.model_id, day=day)
    if connection is None:
        gone = "This conversation's connection was deleted."
        return Capabilities(
            controls={p.name: Control(p, False, gone) for p in PARAMETERS},
            model=model,
            json_schema=False,
            json_schema_reason=gone,
            streams_json=True,
            thinking_field="",
            max_tokens_limit=None,
        )
    spec = connection.spec
    thinking_field = THINKING_FIELDS.get(model.model_id, "") if model is not None else ""
    controls = {
        parameter.name: _control(parameter, spec=spec, model=model, thinking_field=thinking_field)
        for parameter in PARAMETERS
    }
    json_schema, json_schema_reason = _json_schema_gate(conversation.model_id, model)
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
        max_tokens_limit=model.context_window if model is not None else None,
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


# --- the request -------------------------------------------------------------------------


def chat_request_build(
    *, conversation: Conversation, messages: list[dict[str, Any]], day: dt.date
) -> ChatRequest:
    """A turn's request from the conversation's settings. Raises `ValidationError` when a
    stored setting can no longer be sent (the catalogue changed): nothing is sent then."""
    caps = composer_capabilities(conversation=conversation, day=day)
    connection = conversation.connection
    accepted = connection.spec.parameters if connection is not None else frozenset()
    wire: dict[str, Any] = {}
    for name, value in (conversation.parameters or {}).items():
        control = caps.controls.get(name)
        if control is None or not control.available or value is None:
            continue  # a parameter the kind or model does not take is never sent
        if name == "thinking":
            wire["chat_template_kwargs"] = {caps.thinking_field: bool(value)}
        else:
            wire[control.parameter.wire] = value
    wire = {key: value for key, value in wire.items() if key in accepted}  # belt and braces
    response_format = conversation.response_format or None
    if response_format is not None and response_format.get("type") == JSON_SCHEMA and not caps.json_schema:
        raise ValidationError(
            f"{caps.json_schema_reason} Set the response format to text or JSON object in the settings."
        )
    json_mode = response_format is not None and response_format.get("type") in (JSON_OBJECT, JSON_SCHEMA)
    return ChatRequest(
        model=conversation.model_id,
        messages=messages,
        max_tokens=wire.pop("max_tokens", None),
        temperature=wire.pop("temperature", None),
        response_format=_wire_response_format(response_format, conversation=conversation),
        parameters=wire,
        **tools_request_fields(conversation),  # tools, tool_choice, parallel_tool_calls (chat.tools)
        affinity_key=conversation.affinity_key if conversation.use_affinity else "",
        stream=not (json_mode and not caps.streams_json),
    )


def _wire_response_format(
    response_format: Mapping[str, Any] | None, *, conversation: Conversation
) -> dict[str, Any] | None:
    if response_format is None or response_format.get("type") == TEXT:
        return None
    if response_format.get("type") != JSON_SCHEMA:
        return dict(response_format)
    spec = response_format.get("json_schema") or {}
    connection = conversation.connection
    legacy = (
        connection is not None
        and connection.spec.wire == WireFormat.WORKERS_AI
        and conversation.model_id in BARE_SCHEMA_MODELS
    )
    if legacy:
        return {"type": JSON_SCHEMA, "json_schema": spec.get("schema", {})}
    return {"type": JSON_SCHEMA, "json_schema": dict(spec)}


# --- settings ------------------------------------------------------------------------------


def parameters_check(*, caps: Capabilities, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters to store (unset ones dropped); `ValidationError` naming each field the
    conversation's model or connection does not take."""
    errors: dict[str, list[str]] = {}
    kept: dict[str, Any] = {}
    for name, value in parameters.items():
        if value is None or value == "" or value == []:
            continue
        control = caps.controls.get(name)
        if control is None:
            errors.setdefault("__all__", []).append(f"Unknown parameter {name!r}.")
        elif not control.available:
            errors[name] = [control.reason]
        else:
            kept[name] = value
    limit = caps.max_tokens_limit
    if "max_tokens" in kept and limit is not None and kept["max_tokens"] > limit:
        errors["max_tokens"] = [f"At most {limit:,}: the model's context window."]
    if errors:
        raise ValidationError(errors)
    return kept


def json_text_parse(text: str) -> tuple[Any, Issue | None]:
    """(value, None) for JSON text, else (None, where and why it is not JSON)."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, Issue("$", f"Not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.")


def schema_issues(schema: Any) -> list[Issue]:
    """Where `schema` breaks the JSON Schema 2020-12 meta-schema, each issue at its path."""
    meta = Draft202012Validator(Draft202012Validator.META_SCHEMA)
    return _issues(meta.iter_errors(schema))


def _issues(errors: Iterable[SchemaViolation]) -> list[Issue]:
    found = sorted(errors, key=lambda error: (len(error.absolute_path), list(map(str, error.absolute_path))))
    return [Issue(json_path(error.absolute_path), error.message) for error in found[:MAX_ERRORS_SHOWN]]


def response_format_check(
    *, caps: Capabilities, kind: str, name: str = "", strict: bool = False, schema_text: str = ""
) -> dict[str, Any] | None:
    """The response format to store (None for text). `ValidationError` keyed by field:
    `response_format`, `schema_name`, `schema` (messages prefixed by their JSON path)."""
    if kind not in RESPONSE_FORMATS:
        raise ValidationError({"response_format": ["Choose text, JSON object or JSON schema."]})
    if kind == TEXT:
        return None
    if kind == JSON_OBJECT:
        return {"type": JSON_OBJECT}
    if not caps.json_schema:
        raise ValidationError({"response_format": [caps.json_schema_reason]})
    errors: dict[str, list[str]] = {}
    if not SCHEMA_NAME.fullmatch(name):
        errors["schema_name"] = ["A name of 1 to 64 letters, digits, _ or -."]
    schema: Any = None
    if not schema_text.strip():
        errors["schema"] = ["Write the JSON schema the answer must follow."]
    elif len(schema_text) > SCHEMA_MAX_CHARS:
        errors["schema"] = [f"A schema can be at most {SCHEMA_MAX_CHARS:,} characters."]
    else:
        schema, problem = json_text_parse(schema_text)
        if problem is not None:
            errors["schema"] = [problem.message]
        elif not isinstance(schema, dict):
            errors["schema"] = ["$: the schema must be a JSON object."]
        elif issues := schema_issues(schema):
            errors["schema"] = [f"{issue.path}: {issue.message}" for issue in issues]
    if errors:
        raise ValidationError(errors)
    return {"type": JSON_SCHEMA, "json_schema": {"name": name, "strict": strict, "schema": schema}}


# --- the answer --------------------------------------------------------------------------


def structured_check(*, text: str, response_format: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """For an answer under a JSON response format: {"valid", "errors": [{"path", "message"}]}.

    None for text answers (and empty ones: a failed request has nothing to check).
    """
    kind = (response_format or {}).get("type")
    if kind not in (JSON_OBJECT, JSON_SCHEMA) or not text.strip():
        return None
    value, problem = json_text_parse(text)
    if problem is not None:
        return {"valid": False, "errors": [problem.as_dict()]}
    issues: list[Issue] = []
    if kind == JSON_OBJECT:
        if not isinstance(value, dict):
            issues.append(Issue("$", "The answer is JSON but not an object."))
    else:
        assert response_format is not None
        schema = (response_format.get("json_schema") or {}).get("schema") or {}
        try:
            issues = _issues(Draft202012Validator(schema).iter_errors(value))
        except Exception as exc:  # e.g. a $ref nothing resolves (remote ones are never fetched)
            issues = [Issue("$", f"The schema could not be applied: {exc}")]
    return {"valid": not issues, "errors": [issue.as_dict() for issue in issues]}
