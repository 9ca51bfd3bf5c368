"""What every chat adapter shares: the request type, the protocol, and the wire parsing.

Both upstream wire formats (Workers AI `/ai/run` and OpenAI chat completions) stream
`data: {json}` server-sent events whose payloads are either OpenAI `chat.completion.chunk`
objects or Workers AI native `{"response": ..., "usage": ...}` frames, and may answer a
stream request with a plain JSON body instead. `HTTPChatAdapter` turns all of them into
`playground.providers.events`; a concrete adapter only says where to send the request and
what to put in it.
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

from playground.providers.events import (
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UpstreamError,
    UsageReport,
)
from playground.providers.http import TimeoutPolicy, UpstreamHTTPError, upstream_stream
from playground.providers.images import content_prompt_chars
from playground.providers.request_body import recorded_body
from playground.providers.retry import retrying
from playground.providers.secrets import redact
from playground.providers.usage_normalize import normalize_usage
from playground.storable import storable_json

logger = logging.getLogger(__name__)

DONE = "[DONE]"
CACHE_KEYS = ("cached_tokens", "cache_read_input_tokens")


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]  # OpenAI chat-completions message dicts
    max_tokens: int | None = None
    temperature: float | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    # Other body fields (top_p, seed, stop, penalties, reasoning controls), already limited to
    # what the connection's kind accepts (`KindSpec.parameters`).
    parameters: dict[str, Any] = field(default_factory=dict)
    affinity_key: str = ""  # sent as x-session-affinity when non-empty
    stream: bool = True

    @property
    def prompt_chars(self) -> int:
        """Characters of everything the model reads: what a token estimate of the prompt counts
        (the context-window check, the budget reservation, and usage when a provider reports none).

        Message content: parts count their text; each image counts as a fixed
        `IMAGE_PROMPT_CHARS` (never its base64, which would make one photo look like a million
        tokens). Assistant `tool_calls` count their names and arguments, and the tool
        definitions and the response format (its schema) count as the JSON sent: models read
        them too, in their template.
        """
        chars = sum(_message_prompt_chars(message) for message in self.messages)
        for sent in (self.tools, self.response_format):
            if sent:
                chars += len(json.dumps(sent, ensure_ascii=False))
        return chars


def _message_prompt_chars(message: Mapping[str, Any]) -> int:
    chars = content_prompt_chars(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            arguments = function.get("arguments") or ""
            if not isinstance(arguments, str):  # some wires send the arguments as an object
                arguments = json.dumps(arguments, ensure_ascii=False)
            chars += len(str(function.get("name") or "")) + len(arguments)
    return chars


class ChatAdapter(Protocol):
    # An async generator (not just an iterator) so callers can `aclose()` it / use `aclosing`.
    def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent]: ...

    def body_as_sent(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body `stream` sends for `request`, fit to store: secrets and images redacted."""
        ...


class HTTPChatAdapter(ABC):
    """Sends one chat request and yields normalized events; never raises for upstream trouble.

    Upstream failures end the stream with a single `UpstreamError` whose message is
    redacted. Closing the generator (or cancelling its consumer) closes the HTTP stream.
    """

    def __init__(self, *, token: str) -> None:
        self.token = token

    @abstractmethod
    def endpoint(self, request: ChatRequest) -> str: ...

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"messages": request.messages, "stream": request.stream}
        if request.stream:
            body["stream_options"] = {"include_usage": True}
        optional = {
            **request.parameters,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "tools": request.tools,
            "tool_choice": request.tool_choice,
            "parallel_tool_calls": request.parallel_tool_calls,
            "response_format": request.response_format,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        return body

    def body_as_sent(self, request: ChatRequest) -> dict[str, Any]:
        """`payload(request)` (what `_attempt` posts) made fit to keep on the usage record.

        Our own token is never put in a body, but a user could paste it into a message: any
        string holding it (or anything credential-shaped) is redacted, and each image data
        URL is replaced by its hash, type and size.
        """
        return recorded_body(self.payload(request), secrets=[self.token] if self.token else [])

    def headers(self, request: ChatRequest) -> dict[str, str]:
        headers = {"accept": "text/event-stream, application/json"}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        if request.affinity_key:
            headers["x-session-affinity"] = request.affinity_key
        return headers

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent]:
        policy = TimeoutPolicy.from_settings()
        deadline = policy.deadline()
        try:
            async with aclosing(
                retrying(lambda: self._attempt(request, policy, deadline), deadline=deadline)
            ) as events:
                async for event in events:
                    yield event
        except UpstreamHTTPError as exc:
            yield self._error_event(exc)

    async def _attempt(
        self, request: ChatRequest, policy: TimeoutPolicy, deadline: float
    ) -> AsyncGenerator[StreamEvent]:
        async with upstream_stream(
            "POST",
            self.endpoint(request),
            headers=self.headers(request),
            json=self.payload(request),
            timeout_policy=policy,
            deadline=deadline,
        ) as response:
            assembler = EventAssembler(request_id=response.request_id, http_status=response.status)
            complete = not response.is_event_stream  # a JSON body is whole once read
            if response.is_event_stream:
                async with aclosing(sse_data(response.lines())) as payloads:
                    async for payload in payloads:
                        if payload == DONE:
                            complete = True
                            break
                        chunk = decode_frame(payload)
                        if chunk is not None:
                            for event in assembler.feed(chunk):
                                yield event
            else:
                for event in assembler.feed(unwrap_envelope(decode_body(await response.read()))):
                    yield event
            for event in assembler.finish(complete=complete):
                yield event

    def _error_event(self, exc: UpstreamHTTPError) -> UpstreamError:
        code, message = error_details(_json_or_none(exc.body)) if exc.body else ("", "")
        return UpstreamError(
            message=redact(message or exc.message, [self.token] if self.token else []),
            http_status=exc.status,
            code=code or exc.code,
            is_timeout=exc.is_timeout,
            upstream_request_id=exc.request_id,
        )


async def sse_data(lines: AsyncIterator[str]) -> AsyncGenerator[str]:
    """The payload of every `data:` line of a server-sent event stream.

    Each data line is taken as one payload rather than joining multi-line events: LLM
    providers put one JSON object per line, and some omit the blank separator lines.
    """
    async for line in lines:
        name, _, value = line.partition(":")
        if name == "data":
            payload = value.removeprefix(" ").strip()
            if payload:
                yield payload


def decode_frame(payload: str) -> Mapping[str, Any] | None:
    chunk = _json_or_none(payload)
    if not isinstance(chunk, Mapping):
        logger.warning("skipped an upstream stream frame that is not a JSON object")
        return None
    return chunk


def decode_body(raw: bytes) -> Any:
    body = _json_or_none(raw)
    if body is None:
        raise UpstreamHTTPError("The upstream sent a reply that is neither an event stream nor JSON.")
    return body


def unwrap_envelope(body: Any) -> Mapping[str, Any]:
    """The model output of a Cloudflare v4 envelope (`{"result", "success", "errors"}`), or the body."""
    if isinstance(body, Mapping) and "result" in body and ("success" in body or "errors" in body):
        if body.get("success") is False or body.get("errors"):
            _raise_for_error(body)
        body = body["result"]
    if not isinstance(body, Mapping):
        raise UpstreamHTTPError("The upstream sent a JSON reply without a completion.")
    return body


def error_details(body: Any) -> tuple[str, str]:
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


class EventAssembler:
    """Turns decoded chunks of one reply into events, in order, with one usage report at the end.

    Chunks may be OpenAI `chat.completion.chunk` (`choices[].delta`), a whole
    `chat.completion` (`choices[].message`), or Workers AI native frames (`response`,
    top-level `tool_calls`). A frame with non-empty `choices` is read only through them:
    some Workers AI frames repeat the text in `response`, and reading both doubles it.
    Usage may arrive twice (a chunk with empty `choices`, then a native trailer); the
    reports are merged, never added.
    """

    def __init__(self, *, request_id: str = "", http_status: int | None = None) -> None:
        self.request_id = request_id
        self.http_status = http_status
        self.finish_reason = ""
        self.saw_tool_call = False
        self.usages: list[Mapping[str, Any]] = []

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        if chunk.get("error") or (chunk.get("errors") and chunk.get("success") is False):
            _raise_for_error(chunk)
        if not self.request_id and isinstance(chunk.get("id"), str):
            self.request_id = chunk["id"]
        if isinstance(usage := chunk.get("usage"), Mapping):
            self.usages.append(usage)
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices:
            return [event for choice in choices for event in self._choice_events(choice)]
        return self._native_events(chunk)

    def finish(self, *, complete: bool) -> list[StreamEvent]:
        """The usage report and the `Finish`, once the reply ended.

        `complete`: the reply ended as it should ([DONE], or a whole JSON body). A stream
        that just stops, with no finish reason, no usage and no [DONE], was cut short.
        """
        if not (complete or self.finish_reason or self.usages):
            raise UpstreamHTTPError(
                "The stream ended before the model finished.",
                code="stream_incomplete",
                request_id=self.request_id,
            )
        events: list[StreamEvent] = []
        usage = normalize_usage(merge_usage(self.usages)) if self.usages else None
        if usage is not None:
            events.append(UsageReport(usage))
        reason = self.finish_reason or ("tool_calls" if self.saw_tool_call else "stop")
        events.append(
            Finish(reason=reason, upstream_request_id=self.request_id, http_status=self.http_status)
        )
        return events

    def _choice_events(self, choice: Any) -> list[StreamEvent]:
        if not isinstance(choice, Mapping):
            return []
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        delta = choice.get("delta") or choice.get("message") or {}
        if not isinstance(delta, Mapping):
            _raise_malformed("a choice's delta is not an object")
        events: list[StreamEvent] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            events.append(ReasoningDelta(reasoning))
        if isinstance(content := delta.get("content"), str) and content:
            events.append(TextDelta(content))
        events.extend(self._tool_call_events(delta.get("tool_calls")))
        return events

    def _native_events(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        response = chunk.get("response")
        if isinstance(response, str) and response:
            events.append(TextDelta(response))
        elif isinstance(response, Mapping | list):  # JSON mode answers with an object
            events.append(TextDelta(json.dumps(response)))
        events.extend(self._tool_call_events(chunk.get("tool_calls")))
        return events

    def _tool_call_events(self, tool_calls: Any) -> list[StreamEvent]:
        events = _parse_tool_calls(tool_calls)
        self.saw_tool_call = self.saw_tool_call or bool(events)
        return events


def merge_usage(usages: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One usage dict from several reports of the same reply.

    The last report that carries a cache figure wins (otherwise the last one); fields it
    lacks are filled from the others. Figures are never summed.
    """
    primary = next((usage for usage in reversed(usages) if _has_cache_figure(usage)), usages[-1])
    merged: dict[str, Any] = {}
    for usage in usages:
        merged.update({key: value for key, value in usage.items() if value is not None})
    merged.update(primary)
    return merged


def _has_cache_figure(usage: Mapping[str, Any]) -> bool:
    details = usage.get("prompt_tokens_details")
    if isinstance(details, Mapping) and details.get("cached_tokens") is not None:
        return True
    return any(usage.get(key) is not None for key in CACHE_KEYS)


def _parse_tool_calls(tool_calls: Any) -> list[StreamEvent]:
    if not isinstance(tool_calls, list):
        return []
    events: list[StreamEvent] = []
    for position, call in enumerate(tool_calls):
        if not isinstance(call, Mapping):
            continue
        nested = call.get("function")
        function: Mapping[str, Any] = nested if isinstance(nested, Mapping) else call  # native: flat
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):  # native frames send the arguments as an object
            arguments = json.dumps(arguments)
        index = call.get("index")
        events.append(
            ToolCallDelta(
                index=index if isinstance(index, int) else position,
                id=_optional_text(call.get("id"), "a tool call's id"),
                name=_optional_text(function.get("name"), "a tool call's name"),
                arguments=arguments,
            )
        )
    return events


def _optional_text(value: Any, what: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        _raise_malformed(f"{what} is not text")
    return value


def _raise_for_error(body: Mapping[str, Any]) -> NoReturn:
    raise UpstreamHTTPError("The upstream reported an error.", body=json.dumps(body))


def _raise_malformed(what: str) -> NoReturn:
    raise UpstreamHTTPError(f"The upstream sent a malformed reply: {what}.", code="malformed_reply")


def _json_or_none(raw: str | bytes) -> Any:
    """Decoded upstream JSON, made storable (see `playground.storable`); None if not JSON."""
    try:
        return storable_json(json.loads(raw))
    except ValueError:
        return None


def _text(value: Any) -> str:
    return "" if value is None else str(value)
