"""Reading what an upstream sends back: event-stream lines, JSON frames and bodies, v4 envelopes, errors.

Both wire formats (Workers AI `/ai/run` and OpenAI chat completions) stream `data: {json}`
server-sent events, may answer a stream request with a plain JSON body instead, and wrap
Cloudflare replies in a v4 envelope (`{"result", "success", "errors"}`). These functions only
decode; `assembly.EventAssembler` turns the decoded chunks into events.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, NoReturn

from playground.lib.json_types import JSONValue
from playground.lib.storable import storable_json_loads
from playground.providers.http import UpstreamHTTPError

logger = logging.getLogger(__name__)

DONE = "[DONE]"


async def sse_data(chunks: AsyncIterator[bytes]) -> AsyncGenerator[str]:
    """The payload of every `data:` line of a server-sent event stream, cut from its bytes as they arrive.

    Each data line is taken as one payload rather than joining multi-line events: LLM
    providers put one JSON object per line, and some omit the blank separator lines. Lines end
    at LF, CRLF or a lone CR, as in the SSE spec; a line cut between two reads waits for its
    end (or the end of the stream). Reading bytes (`UpstreamResponse.chunks`) rather than
    httpx's decoded lines saves its text and line decoders and a deadline per line: profiled at
    200 relayed streams, the upstream read path was a third of the web process.
    """
    pending: list[bytes] = []  # the start of a line cut between reads
    async for chunk in chunks:
        if b"\n" not in chunk and b"\r" not in chunk:
            pending.append(chunk)  # joined once, when its line ends: a long line is not scanned again
            continue
        lines = b"".join([*pending, chunk]).splitlines()
        pending = [lines.pop()] if lines and not chunk.endswith((b"\n", b"\r")) else []
        for line in lines:
            if payload := data_payload(line):
                yield payload
    if payload := data_payload(b"".join(pending)):
        yield payload


def data_payload(line: bytes) -> str:
    """The payload of a `data:` line; empty for any other line."""
    if not line.startswith(b"data:"):
        return ""
    return line[5:].decode("utf-8", errors="replace").strip()


def decode_frame(payload: str) -> Mapping[str, Any] | None:
    chunk = json_or_none(payload)
    if not isinstance(chunk, Mapping):
        logger.warning("skipped an upstream stream frame that is not a JSON object")
        return None
    return chunk


def decode_body(raw: bytes) -> JSONValue:
    body = json_or_none(raw)
    if body is None:
        raise UpstreamHTTPError("The upstream sent a reply that is neither an event stream nor JSON.")
    return body


def unwrap_envelope(body: JSONValue) -> Mapping[str, Any]:
    """The model output of a Cloudflare v4 envelope (`{"result", "success", "errors"}`), or the body."""
    if isinstance(body, Mapping) and "result" in body and ("success" in body or "errors" in body):
        if body.get("success") is False or body.get("errors"):
            raise_for_error(body)
        body = body["result"]
    if not isinstance(body, Mapping):
        raise UpstreamHTTPError("The upstream sent a JSON reply without a completion.")
    return body


def error_details(body: JSONValue) -> tuple[str, str]:
    """(code, message) from a v4 envelope (`errors[0]`) or an OpenAI error (`error`)."""
    if not isinstance(body, Mapping):
        return "", ""
    errors = body.get("errors")
    if isinstance(errors, list) and errors and isinstance(errors[0], Mapping):
        first = errors[0]
        return _text(first.get("code")), _text(first.get("message"))
    error = body.get("error")
    if isinstance(error, Mapping):
        return _text(error.get("code") or error.get("type")), _text(error.get("message"))
    if isinstance(error, str):
        return "", error
    return "", ""


def raise_for_error(body: Mapping[str, Any]) -> NoReturn:
    """An error reply (an envelope or a frame) as our error, its body kept for `error_details`."""
    raise UpstreamHTTPError("The upstream reported an error.", body=json.dumps(body))


def json_or_none(raw: str | bytes) -> JSONValue:
    """Decoded upstream JSON, made storable (see `playground.lib.storable`); None if not JSON."""
    try:
        value: JSONValue = storable_json_loads(raw)
    except ValueError:
        return None
    return value


def _text(value: Any) -> str:
    return "" if value is None else str(value)
