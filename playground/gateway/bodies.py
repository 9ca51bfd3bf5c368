"""A client's request body, read for what the gateway must know before sending it on.

The body goes upstream as the client wrote it, with one addition: a streamed request asks
for streaming usage (`stream_options.include_usage`), so the record's tokens are the
provider's and never an estimate (LiteLLM #39088, api7/aisix#594). The `ChatRequest` built
beside it is what the budget's worst case and the meter's estimates read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from playground.gateway.errors import GatewayError
from playground.providers.adapters import ChatRequest, PassthroughRoute

BATCHES_HINT = (
    "The gateway does not queue requests (queueRequest / a `requests` list): send a batch from "
    "the Batches page of the playground instead, or send the requests one by one."
)


@dataclass(frozen=True)
class ClientRequest:
    model: str
    body: dict[str, Any]  # what goes upstream
    stream: bool
    client_wants_usage: bool  # it asked for stream_options.include_usage itself
    chat: ChatRequest


def client_request_read(
    raw: bytes, *, route: PassthroughRoute, path_model: str = "", affinity_key: str = ""
) -> ClientRequest:
    """The body checked for what the gateway needs, or a `GatewayError` (400) saying what is wrong.

    Anything else (a parameter out of range, a malformed tool) is the upstream's to judge:
    its error reaches the client as it answered.
    """
    body = _json_object(raw)
    if "requests" in body:
        raise GatewayError(400, "queue_not_supported", BATCHES_HINT)
    model = path_model if route == PassthroughRoute.RUN else body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise GatewayError(400, "invalid_request", "The body has no `model`: name the model to call.")
    messages = _messages(body)
    stream = body.get("stream") is True
    options = body.get("stream_options")
    wants_usage = isinstance(options, Mapping) and options.get("include_usage") is True
    if stream:
        body = {
            **body,
            "stream_options": {**(options if isinstance(options, Mapping) else {}), "include_usage": True},
        }
    tools = body.get("tools")
    response_format = body.get("response_format")
    chat = ChatRequest(
        model=model,
        messages=messages,
        max_tokens=_positive_int(body.get("max_tokens")) or _positive_int(body.get("max_completion_tokens")),
        tools=tools if isinstance(tools, list) else None,
        response_format=response_format if isinstance(response_format, dict) else None,
        affinity_key=affinity_key,
        stream=stream,
    )
    return ClientRequest(model=model, body=body, stream=stream, client_wants_usage=wants_usage, chat=chat)


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise GatewayError(400, "invalid_json", f"The body is not JSON ({exc}).") from None
    if not isinstance(body, dict):
        raise GatewayError(400, "invalid_json", "The body must be a JSON object.")
    return body


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages the model reads (a native `prompt` counts as one user message)."""
    messages = body.get("messages")
    if isinstance(messages, list) and messages and all(isinstance(m, dict) for m in messages):
        return messages
    prompt = body.get("prompt")
    if isinstance(prompt, str) and prompt:
        return [{"role": "user", "content": prompt}]
    raise GatewayError(
        400,
        "invalid_request",
        "The body needs `messages`: a non-empty list of message objects (or a `prompt`).",
    )


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
