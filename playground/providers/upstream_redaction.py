"""The text a request sends the model, passed through a redactor before it goes upstream (issue 37's
upstream redaction; the usage floor decides when, `usage.calls.upstream`).

What the model reads is redacted: each message's text (a string, or its `text` parts) and the
arguments of the tool calls an assistant message carries, and a bare `prompt` (Workers AI's
`/ai/run`). Images, roles, names, tool definitions and the other fields go as they were: an
image's base64 may hold anything that looks like a key, and a placeholder in it would break it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

type TextRedactor = Callable[[str], str]


def messages_redacted(messages: list[dict[str, Any]], text: TextRedactor) -> list[dict[str, Any]]:
    """Copies of `messages` with their text redacted (the originals are left as they were)."""
    return [_message_redacted(message, text) for message in messages]


def body_redacted(body: Mapping[str, Any], text: TextRedactor) -> dict[str, Any]:
    """A copy of a client's own body (the gateway's pass-through) with its `messages` and its
    `prompt` redacted."""
    copy = dict(body)
    if isinstance(copy.get("messages"), list):
        copy["messages"] = [
            _message_redacted(message, text) if isinstance(message, Mapping) else message
            for message in copy["messages"]
        ]
    if isinstance(copy.get("prompt"), str):
        copy["prompt"] = text(copy["prompt"])
    return copy


def _message_redacted(message: Mapping[str, Any], text: TextRedactor) -> dict[str, Any]:
    copy = dict(message)
    content = copy.get("content")
    if isinstance(content, str):
        copy["content"] = text(content)
    elif isinstance(content, list):
        copy["content"] = [_part_redacted(part, text) for part in content]
    if isinstance(copy.get("tool_calls"), list):
        copy["tool_calls"] = [_call_redacted(call, text) for call in copy["tool_calls"]]
    return copy


def _part_redacted(part: Any, text: TextRedactor) -> Any:
    if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
        return {**part, "text": text(part["text"])}
    return part


def _call_redacted(call: Any, text: TextRedactor) -> Any:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("arguments"), str):
        return call
    return {**call, "function": {**function, "arguments": text(function["arguments"])}}
