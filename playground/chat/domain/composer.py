"""The composer: which controls a conversation's model and connection take, and the request.

The one place that turns a conversation's settings (sampling and reasoning parameters,
response format; tools join here) into the `ChatRequest` of a turn. Which of those settings
a conversation may use, and their ranges, are the rules every feature shares
(`playground.providers.request_rules`): a parameter its connection's kind or model does not
take is disabled on the page with the reason, refused when saved, and never sent even if it
was stored; when neither the kind nor the model can stream JSON output (Workers AI answers
5023 to `response_format` with `stream: true`), the request goes out with `stream: false`.

Pure functions over a conversation and the catalogue; nothing here writes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator

from playground.catalog.selectors import catalog_model_serving
from playground.chat.domain.tools import tools_request_fields
from playground.chat.models import Conversation
from playground.presets.variables import messages_fill, variables_read
from playground.providers.adapters import ChatRequest
from playground.providers.json_problems import Issue
from playground.providers.kinds import WireFormat
from playground.providers.request_rules import (
    JSON_OBJECT,
    JSON_SCHEMA,
    RESPONSE_FORMATS,
    SCHEMA_NAME,
    TEXT,
    Capabilities,
    capabilities_unavailable,
    request_capabilities,
    value_problem,
)
from playground.providers.structured_answers import json_text_parse, violations

SCHEMA_MAX_CHARS = 50_000

# Legacy Workers AI models read a bare JSON Schema in `response_format.json_schema` rather
# than OpenAI's {name, schema, strict} envelope (docs/reference/workers-ai-api.md §4.2).
BARE_SCHEMA_MODELS = frozenset({"@cf/meta/llama-3.3-70b-instruct-fp8-fast"})


def composer_capabilities(*, conversation: Conversation, day: dt.date) -> Capabilities:
    connection = conversation.connection
    if connection is None:
        model = catalog_model_serving(model_id=conversation.model_id, day=day)
        return capabilities_unavailable(reason="This conversation's connection was deleted.", model=model)
    return request_capabilities(connection=connection, model_id=conversation.model_id, day=day)


# --- the request -------------------------------------------------------------------------


def chat_request_build(
    *, conversation: Conversation, messages: list[dict[str, Any]], day: dt.date
) -> ChatRequest:
    """A turn's request from the conversation's settings, its prompt variables filled in.

    Raises `ValidationError` when a stored setting can no longer be sent (the catalogue
    changed), `VariablesUnfilled` (one) when a variable the texts use has no value or a value
    its type refuses: nothing is sent then."""
    messages, variables = messages_fill(messages, variables_read(conversation.variables))
    caps = composer_capabilities(conversation=conversation, day=day)
    connection = conversation.connection
    accepted = connection.spec.parameters if connection is not None else frozenset()
    wire = parameters_wire(conversation.parameters or {}, caps=caps)
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
        **tools_request_fields(conversation),  # tools, tool_choice, parallel_tool_calls (chat.domain.tools)
        affinity_key=conversation.affinity_key if conversation.use_affinity else "",
        stream=not (json_mode and not caps.streams_json),
        variables=variables or None,
    )


def parameters_wire(parameters: Mapping[str, Any], *, caps: Capabilities) -> dict[str, Any]:
    """The stored parameters as request fields: the thinking switch in `chat_template_kwargs`
    under the name the model reads, and a parameter the kind or model does not take left out."""
    wire: dict[str, Any] = {}
    for name, value in parameters.items():
        control = caps.controls.get(name)
        if control is None or not control.available or value is None:
            continue  # a parameter the kind or model does not take is never sent
        if name == "thinking":
            wire["chat_template_kwargs"] = {caps.thinking_field: bool(value)}
        else:
            wire[control.parameter.wire] = value
    return wire


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
        elif name != "thinking" and (
            problem := value_problem(control.parameter.wire, value, max_tokens_limit=caps.max_tokens_limit)
        ):
            errors[name] = [problem]
        else:
            kept[name] = value
    if errors:
        raise ValidationError(errors)
    return kept


def schema_issues(schema: Any) -> list[Issue]:
    """Where `schema` breaks the JSON Schema 2020-12 meta-schema, each issue at its path."""
    meta = Draft202012Validator(Draft202012Validator.META_SCHEMA)
    return violations(meta.iter_errors(schema))


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
