"""OpenAI chat messages -> the plain system/user/assistant text turns a chat template takes.

This model reads text only, so image, audio and file parts are refused with a clear
message. Tool traffic is turned into text the model can read: an assistant's tool calls
become the same JSON array the model is asked to answer with (so a conversation that
goes through a tool call keeps its prefix cached), and a `tool` message becomes a user
turn carrying the result, named by its call's tool and position ("Result of get_weather
(call 1)"), not by the call's id: the model never sees the ids (they are not in the calls'
text), and a random id in the prompt would make greedy answers differ from one conversation
to the next. Consecutive turns of one role are merged because templates
such as Gemma's insist on strict user/assistant alternation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from playground.engine.errors import EngineError, invalid_input

Turn = dict[str, str]

_MEDIA_PARTS = {
    "image_url": "images",
    "image": "images",
    "input_image": "images",
    "input_audio": "audio",
    "audio": "audio",
    "file": "files",
    "input_file": "files",
}


def render_tool_calls(calls: list[tuple[str, str]]) -> str:
    """The text of a tool-call answer: `[{"name": ..., "arguments": {...}}, ...]`.

    `calls` holds (name, arguments JSON text); the arguments are spliced in verbatim so
    the text matches what the model generated, token for token.
    """
    items = [f'{{"name":{json.dumps(name)},"arguments":{arguments}}}' for name, arguments in calls]
    return "[" + ",".join(items) + "]"


def normalize_messages(raw: Any, *, model_id: str) -> list[Turn]:
    """Validated, merged turns; a leading system turn holds every system/developer message."""
    if raw is None:
        raise invalid_input("Send either `messages` (a non-empty list) or `prompt` (a string).")
    if not isinstance(raw, list) or not raw:
        raise invalid_input("`messages` must be a non-empty list of message objects.")
    system_parts: list[str] = []
    turns: list[Turn] = []
    tool_calls: dict[str, tuple[str, int]] = {}  # call id -> (tool name, position in its turn)
    for index, message in enumerate(raw):
        where = f"messages[{index}]"
        if not isinstance(message, Mapping):
            raise invalid_input(f"{where} must be an object with a `role` and `content`.")
        role = message.get("role")
        if role in ("system", "developer"):
            system_parts.append(_required_text(message, where, model_id))
        elif role == "user":
            _append(turns, "user", _required_text(message, where, model_id))
        elif role == "assistant":
            _append(turns, "assistant", _assistant_text(message, where, model_id, tool_calls))
        elif role in ("tool", "function"):
            _append(turns, "user", _tool_result_text(message, where, model_id, tool_calls))
        else:
            raise invalid_input(
                f"{where}.role must be one of system, developer, user, assistant or tool; got {role!r}."
            )
    if not turns and not any(part.strip() for part in system_parts):
        raise invalid_input("`messages` holds no text to answer.")
    system = [{"role": "system", "content": "\n\n".join(system_parts)}] if system_parts else []
    return system + turns


def prompt_messages(prompt: Any) -> list[Turn]:
    if not isinstance(prompt, str) or not prompt.strip():
        raise invalid_input("`prompt` must be a non-empty string.")
    return [{"role": "user", "content": prompt}]


def with_system_note(turns: list[Turn], note: str) -> list[Turn]:
    """`turns` with `note` appended to the system turn (created when missing)."""
    if not note:
        return turns
    if turns and turns[0]["role"] == "system":
        system = turns[0]["content"]
        return [{"role": "system", "content": f"{system}\n\n{note}" if system else note}, *turns[1:]]
    return [{"role": "system", "content": note}, *turns]


def _append(turns: list[Turn], role: str, text: str) -> None:
    if turns and turns[-1]["role"] == role:
        turns[-1] = {"role": role, "content": f"{turns[-1]['content']}\n\n{text}"}
    else:
        turns.append({"role": role, "content": text})


def _required_text(message: Mapping[str, Any], where: str, model_id: str) -> str:
    if message.get("content") is None:
        raise invalid_input(f"{where}.content is required.")
    return _content_text(message["content"], where, model_id)


def _content_text(content: Any, where: str, model_id: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid_input(f"{where}.content must be a string or a list of content parts.")
    texts: list[str] = []
    for position, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in _MEDIA_PARTS:
            raise EngineError(
                8001,
                400,
                f"The model {model_id} does not accept {_MEDIA_PARTS[kind]}: {where}.content[{position}] "
                f"is a {kind!r} part. Send text only.",
            )
        if kind != "text" or not isinstance(part.get("text"), str):
            raise invalid_input(
                f"{where}.content[{position}] must be a text part ({{'type': 'text', 'text': ...}})."
            )
        texts.append(part["text"])
    return "\n".join(texts)


def _assistant_text(
    message: Mapping[str, Any], where: str, model_id: str, tool_calls: dict[str, tuple[str, int]]
) -> str:
    text = _content_text(message.get("content"), where, model_id)
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise invalid_input(f"{where}.tool_calls must be a list.")
    calls: list[tuple[str, str]] = []
    for position, call in enumerate(raw_calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        arguments = function.get("arguments", "{}") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not isinstance(arguments, str):
            raise invalid_input(
                f"{where}.tool_calls[{position}] must be {{'id', 'type': 'function', "
                "'function': {'name', 'arguments': <JSON text>}}."
            )
        try:
            json.loads(arguments)
        except ValueError as exc:
            raise invalid_input(
                f"{where}.tool_calls[{position}].function.arguments is not JSON text."
            ) from exc
        if isinstance(call.get("id"), str):
            tool_calls[call["id"]] = (name, position + 1)
        calls.append((name, arguments))
    if not calls and not text.strip():
        raise invalid_input(f"{where} needs `content` or `tool_calls`.")
    return "\n".join(part for part in (text, render_tool_calls(calls) if calls else "") if part)


def _tool_result_text(
    message: Mapping[str, Any], where: str, model_id: str, tool_calls: dict[str, tuple[str, int]]
) -> str:
    call_id = message.get("tool_call_id")
    if message.get("role") == "tool" and not isinstance(call_id, str):
        raise invalid_input(f"{where} is a tool result and needs `tool_call_id`.")
    called, position = tool_calls.get(call_id or "", ("the tool", 0))
    name = message.get("name") or called
    result = _content_text(message.get("content"), where, model_id)
    return f"Result of {name}" + (f" (call {position})" if position else "") + f":\n{result}"
