"""The adapter contract (`ChatAdapter`) and the HTTP adapter both wire formats build on.

`HTTPChatAdapter` sends one request (with retries, within one deadline), reads the reply with
`frames` and turns it into `playground.providers.events` with `assembly.EventAssembler`; a
concrete adapter only says where to send the request and what to put in it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import replace
from typing import Any, Protocol

from playground.providers.adapters.assembly import EventAssembler
from playground.providers.adapters.frames import (
    DONE,
    decode_body,
    decode_frame,
    error_details,
    json_or_none,
    sse_data,
    unwrap_envelope,
)
from playground.providers.adapters.request import ChatRequest
from playground.providers.events import StreamEvent, UpstreamError
from playground.providers.http import TimeoutPolicy, UpstreamHTTPError, upstream_stream
from playground.providers.request_body import recorded_body
from playground.providers.retry import retrying
from playground.providers.secrets import redact
from playground.providers.upstream_redaction import TextRedactor, messages_redacted


class ChatAdapter(Protocol):
    # An async generator (not just an iterator) so callers can `aclose()` it / use `aclosing`.
    def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent]: ...

    def body_as_sent(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body `stream` sends for `request`, fit to store: secrets and images redacted."""
        ...

    def upstream_redacted(self, request: ChatRequest, text: TextRedactor) -> ChatRequest:
        """The request to stream instead of `request` so that the text the model reads goes
        through `text` (`providers.upstream_redaction`); an adapter that sends a body of its
        own redacts that body too."""
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

    def upstream_redacted(self, request: ChatRequest, text: TextRedactor) -> ChatRequest:
        return replace(request, messages=messages_redacted(request.messages, text))

    def headers(self, request: ChatRequest) -> dict[str, str]:
        return request_headers(request, token=self.token)

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
            yield upstream_error_event(exc, token=self.token)

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
                async with aclosing(sse_data(response.chunks())) as payloads:
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


def request_headers(request: ChatRequest, *, token: str) -> dict[str, str]:
    """What every chat request sends besides its body: the token, and the affinity key if any."""
    return wire_headers(affinity_key=request.affinity_key, token=token)


def wire_headers(*, affinity_key: str, token: str) -> dict[str, str]:
    """`request_headers` from its two inputs: generated code (`providers.code_samples`) sends
    these too, with `token` left out (it reads the secret from the environment)."""
    headers = {"accept": "text/event-stream, application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    if affinity_key:
        headers["x-session-affinity"] = affinity_key
    return headers


def upstream_error_event(exc: UpstreamHTTPError, *, token: str) -> UpstreamError:
    """The failure as the one event a stream ends with; its message redacted of `token`."""
    code, message = error_details(json_or_none(exc.body)) if exc.body else ("", "")
    return UpstreamError(
        message=redact(message or exc.message, [token] if token else []),
        http_status=exc.status,
        code=code or exc.code,
        is_timeout=exc.is_timeout,
        upstream_request_id=exc.request_id,
        retry_after=exc.retry_after,
    )
