"""A real HTTP/1.1 server on loopback that plays a Workers AI or OpenAI-compatible upstream.

It runs in a background thread with its own event loop, so code under test talks to it
over a real socket (pooled keep-alive connections, chunked SSE, real timeouts).

Use it through the `fake_upstream` fixture (tests/fakes/fixtures.py, registered for every
test package by `pytest_plugins` in tests/conftest.py)::

    # tests/<app>/test_<thing>.py
    from tests.fakes.upstream import openai_chunk, sse, usage, usage_chunk

    async def test_it_streams(fake_upstream):
        fake_upstream.script(sse([openai_chunk("Hi"), usage_chunk(usage(12, 1))]))
        adapter = OpenAICompatAdapter(base_url=fake_upstream.url + "/v1", token="t")
        ...
        assert fake_upstream.requests[0].headers["authorization"] == "Bearer t"

Addresses: `fake_upstream.url` is `http://127.0.0.1:<port>`; any path is served. Workers AI
connections use `base_url=fake_upstream.workers_base_url` (`<url>/client/v4`),
OpenAI-compatible ones `fake_upstream.url + "/v1"`.

Scripting: `fake_upstream.script(*replies)` queues replies; each request takes the next
one. With an empty queue the server answers like a healthy upstream: it streams
`fake_upstream.default_text` word by word in the format the path implies (native
`{"response"}` frames plus a `{"response":"","usage"}` trailer for `/ai/run/`, OpenAI
chunks plus a usage chunk otherwise), or a JSON reply unless the body has `"stream": true`
(as the real APIs do).

Replies:
- `sse(frames, delay=0, first_delay=0, status=200, headers=None, done=True, abort=False)`:
  one `data:` event per frame (a dict is JSON-encoded, a str is sent as is), `delay`
  seconds between frames, then `data: [DONE]` unless `done=False`; `abort=True` drops the
  connection after the frames without ending the chunked body (an upstream crash).
  `line_end="\r\n"` or `"\r"` ends the lines so; `cut=n` writes each event in pieces of n
  bytes, each its own chunk a moment apart (lines and UTF-8 characters cut between reads).
- `paced(n, every_ms, wire="openai"|"native")`: n text chunks, one every `every_ms`; each
  carries its send time twice: `"sent_ns": <time.time_ns()>` on the frame and `t=<ns>;` as
  its text. Ends with a usage frame and `[DONE]`.
- `json_reply(body, status=200, headers=None)`: a JSON body (a str is sent as is) with
  Content-Type application/json, e.g. a JSON answer to a stream request.
- `error(status, body=None, retry_after=None, headers=None)`: an error status; the body
  defaults to a v4 error envelope; `retry_after` sets the `Retry-After` header.
- `hang(seconds)`: read the request, send nothing, close after `seconds`.
- `redirect(location, status=302)`.
- `computed(reply_for)`: the reply `reply_for(request)` returns, decided when the request
  arrives (e.g. a queue that refuses a submission because of what one of its items holds).

Frame and body builders: `openai_chunk`, `usage_chunk`, `native_frame`,
`text_twice_frame`, `usage`, `chat_completion`, `envelope`, `v4_error`, `openai_error`.

Hostile upstreams: a dict frame is encoded with `json.dumps`, so `float("nan")` goes out as
`NaN`, `1e400` as `Infinity` and "\\ud800" as the escape `\\ud800`, the way a lying upstream
sends them; a str frame goes out byte for byte. `sse(frames, done=False)` whose frames carry
no finish reason and no usage is a stream that stops before the model finished.

`await collect(adapter.stream(request))` gathers every event of a stream into a list.

Recording: `fake_upstream.requests` lists `RecordedRequest(method, path, headers, json, raw)`
(header names lower-cased, `json` the decoded body or None) in arrival order. Each also
records how its reply ended: `await fake_upstream.wait_ended(index)` waits until the reply
is over and returns the request, whose `disconnected` says whether the client hung up
before the reply was complete (e.g. a cancelled stream).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

SENT_NS = "__SENT_NS__"
PADDING = "abdefghijklmnopqrstuvwxyz0123456"
CUT_PAUSE = 0.005  # between the pieces of a cut event, so that each arrives in a read of its own

Frame = dict[str, Any] | str


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    json: Any
    raw: bytes = b""  # the body's bytes as received (a signature is checked over these)
    disconnected: bool = False
    ended: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Sse:
    frames: list[Frame]
    delay: float = 0.0
    first_delay: float = 0.0
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    done: bool = True
    abort: bool = False
    line_end: str = "\n"
    cut: int = 0


@dataclass(frozen=True)
class JsonReply:
    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hang:
    seconds: float


@dataclass(frozen=True)
class Computed:
    reply_for: Callable[[RecordedRequest], Sse | JsonReply | Hang]


Reply = Sse | JsonReply | Hang | Computed


# --- replies -------------------------------------------------------------------------


def sse(
    frames: Iterable[Frame],
    *,
    delay: float = 0.0,
    first_delay: float = 0.0,
    status: int = 200,
    headers: dict[str, str] | None = None,
    done: bool = True,
    abort: bool = False,
    line_end: str = "\n",
    cut: int = 0,
) -> Sse:
    return Sse(list(frames), delay, first_delay, status, headers or {}, done, abort, line_end, cut)


def paced(n: int, every_ms: float, *, wire: str = "openai") -> Sse:
    text = f"t={SENT_NS};"
    if wire == "native":
        frames: list[Frame] = [{**native_frame(text), "sent_ns": SENT_NS} for _ in range(n)]
        frames.append(native_frame("", usage=usage(10, n)))
    else:
        frames = [{**openai_chunk(text), "sent_ns": SENT_NS} for _ in range(n)]
        frames += [openai_chunk(finish_reason="stop"), usage_chunk(usage(10, n))]
    return Sse(frames, delay=every_ms / 1000)


def json_reply(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> JsonReply:
    return JsonReply(body, status, headers or {})


def error(
    status: int,
    body: Any = None,
    *,
    retry_after: str | float | None = None,
    headers: dict[str, str] | None = None,
) -> JsonReply:
    all_headers = dict(headers or {})
    if retry_after is not None:
        all_headers["retry-after"] = str(retry_after)
    if body is None:
        body = v4_error(3040 if status == 429 else 5000, HTTPStatus(status).phrase)
    return JsonReply(body, status, all_headers)


def hang(seconds: float) -> Hang:
    return Hang(seconds)


def redirect(location: str, *, status: int = 302) -> JsonReply:
    return JsonReply("", status, {"location": location})


def computed(reply_for: Callable[[RecordedRequest], Sse | JsonReply | Hang]) -> Computed:
    return Computed(reply_for)


# --- frames and bodies -----------------------------------------------------------------


def usage(prompt: int, completion: int, *, cached: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        body["prompt_tokens_details"] = {"cached_tokens": cached}
    return body


def openai_chunk(
    content: str | None = None,
    *,
    reasoning: str | None = None,
    reasoning_field: str = "reasoning_content",
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    chunk_id: str = "chatcmpl-fake",
) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta[reasoning_field] = reasoning
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": 1775107512,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        "p": PADDING,
    }


def usage_chunk(usage_body: dict[str, Any], *, chunk_id: str = "chatcmpl-fake") -> dict[str, Any]:
    """The OpenAI usage chunk: empty `choices`, then `usage`."""
    return {"id": chunk_id, "object": "chat.completion.chunk", "choices": [], "usage": usage_body}


def native_frame(
    response: str, *, usage: dict[str, Any] | None = None, tool_calls: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    frame: dict[str, Any] = {"response": response, "p": PADDING}
    if usage is not None:
        frame["usage"] = usage
    if tool_calls is not None:
        frame["tool_calls"] = tool_calls
    return frame


def text_twice_frame(text: str) -> dict[str, Any]:
    """A live-captured Workers AI shape: the same text in `choices` and in `response`."""
    return {"choices": [{"index": 0, "delta": {"content": text}}], "response": text}


def chat_completion(
    content: str | None,
    *,
    reasoning: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    usage_body: dict[str, Any] | None = None,
    completion_id: str = "chatcmpl-fake",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": 1775107512,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage_body is not None:
        body["usage"] = usage_body
    return body


def envelope(result: Any) -> dict[str, Any]:
    return {"result": result, "success": True, "errors": [], "messages": []}


def v4_error(code: int, message: str) -> dict[str, Any]:
    return {"result": None, "success": False, "errors": [{"code": code, "message": message}], "messages": []}


def openai_error(
    message: str, *, type_: str = "invalid_request_error", code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "code": code}}


async def collect[T](events: AsyncIterator[T]) -> list[T]:
    return [event async for event in events]


# --- the server ------------------------------------------------------------------------


class FakeUpstream:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.default_text = "Hello from the fake upstream."
        # Paths (their endings) that the default reply answers even while replies are scripted: a
        # fake standing in for the engine is also asked its model list and token counts, and
        # those must not take the reply a test scripted for its chat request.
        self.unscripted: tuple[str, ...] = ()
        self.port = 0
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def workers_base_url(self) -> str:
        return self.url + "/client/v4"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    async def wait_requests(self, count: int = 1, *, timeout: float = 5.0) -> list[RecordedRequest]:
        """The requests received, once there are `count`: a test that needs one in flight waits for
        it to arrive instead of sleeping a guess (too short under load, too long otherwise)."""
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"the fake upstream received {len(self.requests)} of {count} requests")
            await asyncio.sleep(0.005)
        return list(self.requests)

    async def wait_ended(self, index: int = -1, *, timeout: float = 5.0) -> RecordedRequest:
        request = self.requests[index]
        if not await asyncio.to_thread(request.ended.wait, timeout):
            raise AssertionError("the fake upstream's reply did not end in time")
        return request

    def start(self) -> None:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-upstream", daemon=True)
        self._thread.start()
        if not ready.wait(5):
            raise RuntimeError("the fake upstream did not start")

    def stop(self) -> None:
        assert self._loop is not None and self._thread is not None
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while (request := await self._read_request(reader)) is not None:
                self.requests.append(request)
                try:
                    keep_alive = await self._reply(self._next_reply(request), request, reader, writer)
                except (ConnectionError, OSError):
                    request.disconnected, keep_alive = True, False
                finally:
                    request.ended.set()
                if not keep_alive:
                    break
        except (ConnectionError, OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # a hang-up or `stop()`; ending normally keeps asyncio from logging the cancel
        finally:
            writer.close()
            self._connections.discard(task)

    async def _read_request(self, reader: asyncio.StreamReader) -> RecordedRequest | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers: dict[str, str] = {}
        for line in header_lines:
            if ":" in line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        return RecordedRequest(method=method, path=path, headers=headers, json=body, raw=raw)

    def _next_reply(self, request: RecordedRequest) -> Sse | JsonReply | Hang:
        with self._lock:
            scripted = self._replies and not request.path.endswith(self.unscripted)
            reply = self._replies.popleft() if scripted else self._default_reply(request)
        return reply.reply_for(request) if isinstance(reply, Computed) else reply

    def _default_reply(self, request: RecordedRequest) -> Sse | JsonReply | Hang:
        words = [word + " " for word in self.default_text.split()]
        words[-1] = words[-1].rstrip()
        counts = usage(10, len(words), cached=0)
        headers = {"cf-ray": f"fake-ray-{len(self.requests)}"}
        # Like the real APIs: a body without `"stream": true` gets a whole JSON answer.
        streaming = isinstance(request.json, dict) and request.json.get("stream") is True
        if "/ai/run/" in request.path:
            if not streaming:
                return json_reply(envelope({"response": self.default_text, "usage": counts}), headers=headers)
            return sse(
                [*(native_frame(word) for word in words), native_frame("", usage=counts)], headers=headers
            )
        if not streaming:
            return json_reply(chat_completion(self.default_text, usage_body=counts), headers=headers)
        frames = [*(openai_chunk(word) for word in words), openai_chunk(finish_reason="stop")]
        return sse([*frames, usage_chunk(counts)], headers=headers)

    async def _reply(
        self,
        reply: Sse | JsonReply | Hang,
        request: RecordedRequest,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Send one reply; False when the connection must close afterwards."""
        if isinstance(reply, Hang):
            if not await _pause(reader, reply.seconds):
                request.disconnected = True
            return False
        if isinstance(reply, JsonReply):
            data = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
            payload = data.encode()
            headers = {
                "content-type": "application/json",
                "content-length": str(len(payload)),
                **reply.headers,
            }
            writer.write(_head(reply.status, headers) + payload)
            await writer.drain()
            return True
        headers = {"content-type": "text/event-stream", "transfer-encoding": "chunked", **reply.headers}
        writer.write(_head(reply.status, headers))
        await writer.drain()
        frames: list[Frame] = [*reply.frames, "[DONE]"] if reply.done else list(reply.frames)
        for position, frame in enumerate(frames):
            pause = reply.first_delay if position == 0 else reply.delay
            if pause and not await _pause(reader, pause):
                request.disconnected = True
                return False
            data = frame if isinstance(frame, str) else json.dumps(frame)
            if SENT_NS in data:
                sent_ns = str(time.time_ns())
                data = data.replace(f'"{SENT_NS}"', sent_ns).replace(SENT_NS, sent_ns)
            event = f"data: {data}{reply.line_end * 2}".encode()
            for start in range(0, len(event), reply.cut or len(event)):
                if start and not await _pause(reader, CUT_PAUSE):
                    request.disconnected = True
                    return False
                _write_chunk(writer, event[start : start + (reply.cut or len(event))])
                await writer.drain()
        if reply.abort:
            return False  # drop the connection mid-body, as a crashed upstream would
        _write_chunk(writer, b"")
        await writer.drain()
        return True


async def _pause(reader: asyncio.StreamReader, seconds: float) -> bool:
    """Sleep, noticing a client hang-up; False when the client closed the connection."""
    try:
        data = await asyncio.wait_for(reader.read(1), seconds)
    except TimeoutError:
        return True
    return bool(data)


def _head(status: int, headers: dict[str, str]) -> bytes:
    phrase = HTTPStatus(status).phrase
    lines = [f"HTTP/1.1 {status} {phrase}", *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _write_chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
