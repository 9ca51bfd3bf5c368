"""Pass-through: a client's own request body sent to its connection, the reply relayed as it came.

The gateway (`playground.gateway`) forwards what a team's application sent, and the
application must receive what the upstream sent: status, frames, fields and their order
(Kimi's `reasoning_content`, tool-call deltas, Workers AI's envelope and usage trailer).
So this adapter yields the reply's bytes (`WireHead`, then `WireBytes`) and, read from the
same bytes as they pass, the normalized events the meter counts. The one change: the
gateway always asks for streaming usage (`stream_options.include_usage`), and when the
client did not ask for it, the usage-only chunk that answer adds is metered but not relayed.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import Any

from playground.lib.storable import storable_json
from playground.providers.adapters.assembly import EventAssembler
from playground.providers.adapters.base import request_headers, upstream_error_event
from playground.providers.adapters.frames import (
    DONE,
    data_payload,
    decode_body,
    decode_frame,
    unwrap_envelope,
)
from playground.providers.adapters.request import ChatRequest
from playground.providers.events import StreamEvent, WireBytes, WireHead
from playground.providers.http import TimeoutPolicy, UpstreamHTTPError, upstream_stream
from playground.providers.request_body import recorded_body
from playground.providers.retry import retrying
from playground.providers.upstream_redaction import TextRedactor, body_redacted


class EventStreamSplitter:
    """Cuts an event stream's bytes into whole lines: the bytes to relay, and the frames in them.

    Every byte is relayed as it came, in the same order, except (with `drop_usage_only`) a
    `data:` line whose object is a usage-only chunk (`"choices": []` with `usage`) and the
    blank line that ends its event. A line cut between two reads waits for its end.
    """

    def __init__(self, *, drop_usage_only: bool) -> None:
        self._drop_usage_only = drop_usage_only
        self._partial: list[bytes] = []  # the start of a line cut between reads
        self._drop_blank = False
        self.done = False  # a `data: [DONE]` line went by
        self.finished = False  # and the reply's finish was made of what came before it

    def feed(self, chunk: bytes) -> tuple[bytes, list[Mapping[str, Any]]]:
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            # Joined once, when its line ends: a long line in many reads is not copied at each.
            self._partial.append(chunk)
            return b"", []
        data = b"".join([*self._partial, chunk[:cut]])
        self._partial = [chunk[cut:]] if cut < len(chunk) else []
        return self._lines(data)

    def flush(self) -> tuple[bytes, list[Mapping[str, Any]]]:
        """What is left once the stream ended: a last line without its newline."""
        data, self._partial = b"".join(self._partial), []
        return self._lines(data)

    def _lines(self, block: bytes) -> tuple[bytes, list[Mapping[str, Any]]]:
        if not block:
            return b"", []
        relayed: list[bytes] = []
        frames: list[Mapping[str, Any]] = []
        for line in block.splitlines(keepends=True):
            text = line.rstrip(b"\r\n")
            if self._drop_blank and not text:
                self._drop_blank = False
                continue
            self._drop_blank = False
            frame = _data_frame(text)
            if isinstance(frame, str):  # DONE
                self.done = True
            elif frame is not None:
                frames.append(frame)
                if self._drop_usage_only and is_usage_only(frame):
                    self._drop_blank = True
                    continue
            relayed.append(line)
        return b"".join(relayed), frames


def _data_frame(line: bytes) -> Mapping[str, Any] | str | None:
    """The object of a `data:` line, DONE, or None (another line, or data that is not an object)."""
    payload = data_payload(line)
    if not payload:
        return None
    return DONE if payload == DONE else decode_frame(payload)


def is_usage_only(frame: Mapping[str, Any]) -> bool:
    """The chunk OpenAI's API adds for `include_usage`: no choices, only the usage."""
    return frame.get("choices") == [] and isinstance(frame.get("usage"), Mapping)


class PassthroughAdapter:
    """Sends `body` (the client's, streaming usage asked for) to `url`; yields the reply's bytes and events.

    A `ChatAdapter`: the metered call reserves, meters and records it like any other request.
    The `ChatRequest` it is given describes the same body (for the budget's worst case and
    the meter's estimates); what goes upstream is `body`. Retries (`retrying`) happen only
    before the first event, so never once a byte may have reached the client; `attempts`
    says how many were made, and `upstream_seconds` how long the upstream took (the time
    the gateway did not spend itself).
    """

    def __init__(
        self,
        *,
        url: str,
        token: str,
        body: dict[str, Any],
        client_wants_usage: bool,
        single_attempt: bool = False,
    ) -> None:
        self.url = url
        self.token = token
        self.body = body
        self.client_wants_usage = client_wants_usage
        # A routed request (`gateway.routed`) retries and falls back in its own one loop: its
        # adapters send once each, so that no retry loop runs inside another.
        self.single_attempt = single_attempt
        self.attempts = 0
        self._sent_at: float | None = None
        self._ended_at: float | None = None

    @property
    def upstream_seconds(self) -> float:
        if self._sent_at is None:
            return 0.0
        return (self._ended_at or time.perf_counter()) - self._sent_at

    def body_as_sent(self, request: ChatRequest) -> dict[str, Any]:
        """Redacted like every adapter's, and made storable: a client's body may hold anything."""
        stored: dict[str, Any] = storable_json(
            recorded_body(self.body, secrets=[self.token] if self.token else [])
        )
        return stored

    def upstream_redacted(self, request: ChatRequest, text: TextRedactor) -> ChatRequest:
        """The client's body is what goes upstream: it is redacted here (this adapter is one
        request's). `request` only describes it (the budget's estimate) and is never sent: it
        is returned as it was, so each value is redacted, and counted, once."""
        self.body = body_redacted(self.body, text)
        return request

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent]:
        policy = TimeoutPolicy.from_settings()
        deadline = policy.deadline()
        try:
            attempts = (
                self._attempt(request, policy, deadline)
                if self.single_attempt
                else retrying(lambda: self._attempt(request, policy, deadline), deadline=deadline)
            )
            async with aclosing(attempts) as events:
                async for event in events:
                    yield event
        except UpstreamHTTPError as exc:
            yield upstream_error_event(exc, token=self.token)
        finally:
            self._ended_at = time.perf_counter()

    async def _attempt(
        self, request: ChatRequest, policy: TimeoutPolicy, deadline: float
    ) -> AsyncGenerator[StreamEvent]:
        self.attempts += 1
        if self._sent_at is None:
            self._sent_at = time.perf_counter()
        async with upstream_stream(
            "POST",
            self.url,
            headers=request_headers(request, token=self.token),
            json=self.body,
            timeout_policy=policy,
            deadline=deadline,
        ) as response:
            yield WireHead(
                status=response.status,
                content_type=response.headers.get("content-type", ""),
                upstream_request_id=response.request_id,
            )
            assembler = EventAssembler(request_id=response.request_id, http_status=response.status)
            if not response.is_event_stream:
                body = await response.read()
                yield WireBytes(body)
                for event in assembler.feed(unwrap_envelope(decode_body(body))):
                    yield event
                for event in assembler.finish(complete=True):
                    yield event
                return
            splitter = EventStreamSplitter(drop_usage_only=not self.client_wants_usage)
            async for chunk in response.chunks():
                for event in _relayed(splitter, splitter.feed(chunk), assembler):
                    yield event
            for event in _relayed(splitter, splitter.flush(), assembler):
                yield event
            if not splitter.done:  # no [DONE]: finished (or found cut short) at the end
                for event in assembler.finish(complete=False):
                    yield event


def _relayed(
    splitter: EventStreamSplitter, block: tuple[bytes, list[Mapping[str, Any]]], assembler: EventAssembler
) -> list[StreamEvent]:
    """The bytes to relay, then the events their frames make; but the block that holds the
    `[DONE]` line goes out after the reply's usage and finish, so the meter has them before the
    client reads `[DONE]` and hangs up (which cancels the call)."""
    data, frames = block
    events: list[StreamEvent] = []
    for frame in frames:
        events.extend(assembler.feed(frame))
    if splitter.done and not splitter.finished:
        splitter.finished = True
        return [*events, *assembler.finish(complete=True), *([WireBytes(data)] if data else [])]
    return [*([WireBytes(data)] if data else []), *events]
