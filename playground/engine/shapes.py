"""Wire shapes: OpenAI chat objects, the Cloudflare v4 envelope, OpenAI errors, SSE frames.

A JSON answer the engine closed after `max_tokens` cut it short keeps `finish_reason: "length"`
(the only reason the formats have for it) and its choice carries one extra field,
`closed_early: {"appended", "schema_error"}`: the text the engine added, and what the closed
answer still breaks of its schema (null when it validates). OpenAI's and Cloudflare's SDKs keep
fields they do not know, so clients that ignore it see a plain cut-off answer that parses.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from playground.engine.errors import EngineError
from playground.engine.protocol import Failed, Finished, ToolCall

_OPENAI_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error"}


@dataclass(frozen=True)
class Reply:
    """Identity shared by every object of one answer."""

    model: str
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))

    def chunk(self, delta: dict[str, Any], finished: Finished | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        if finished is not None:
            choice.update(_ending(finished))
        return {**self._head("chat.completion.chunk"), "choices": [choice]}

    def usage_chunk(self, finished: Finished) -> dict[str, Any]:
        return {**self._head("chat.completion.chunk"), "choices": [], "usage": usage(finished)}

    def completion(self, text: str, calls: list[ToolCall], finished: Finished) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": None if calls else text, "refusal": None}
        if calls:
            message["tool_calls"] = [tool_call(call) for call in calls]
        return {
            **self._head("chat.completion"),
            "choices": [{"index": 0, "message": message, "logprobs": None, **_ending(finished)}],
            "usage": usage(finished),
        }

    def _head(self, kind: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
        }


def finish_reason(finished: Finished) -> str:
    return "stop" if finished.finish_reason == "cancelled" else finished.finish_reason


def _ending(finished: Finished) -> dict[str, Any]:
    """The fields of the choice that ends an answer: its finish reason, and how it was closed."""
    ending: dict[str, Any] = {"finish_reason": finish_reason(finished)}
    if finished.closed_early is not None:
        ending["closed_early"] = {
            "appended": finished.closed_early.appended,
            "schema_error": finished.closed_early.schema_error,
        }
    return ending


def usage(finished: Finished) -> dict[str, Any]:
    return {
        "prompt_tokens": finished.prompt_tokens,
        "completion_tokens": finished.completion_tokens,
        "total_tokens": finished.prompt_tokens + finished.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": finished.cached_tokens},
    }


def tool_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def tool_call_deltas(call: ToolCall) -> list[dict[str, Any]]:
    """OpenAI streams a call as a first delta with id and name, then its arguments."""
    return [
        {
            "tool_calls": [
                {"index": call.index, **tool_call(call), "function": {"name": call.name, "arguments": ""}}
            ]
        },
        {"tool_calls": [{"index": call.index, "function": {"arguments": call.arguments}}]},
    ]


def envelope(result: Any) -> dict[str, Any]:
    return {"result": result, "success": True, "errors": [], "messages": []}


def error_envelope(error: EngineError | Failed) -> dict[str, Any]:
    return {
        "result": None,
        "success": False,
        "errors": [{"code": error.code, "message": error.message}],
        "messages": [],
    }


def openai_error(error: EngineError | Failed) -> dict[str, Any]:
    kind = _OPENAI_ERROR_TYPES.get(
        error.status, "rate_limit_error" if error.status == 429 else "server_error"
    )
    return {"error": {"message": error.message, "type": kind, "code": error.code}}


def sse(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n".encode()
