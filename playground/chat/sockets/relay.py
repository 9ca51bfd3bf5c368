"""Streamed text to WebSocket frames: cheap per chunk, and coalesced under load.

Of the relay's own work per chunk (profiled at 20-200 streams x 50 chunks/s), most was
rendering a template for every chunk (13 us) and sending one frame per chunk (a write
syscall and a deflate each). So:

- `DeltaFrames` renders each delta template of a turn once, with a marker where the text
  goes, and then fills in each chunk's text escaped with `django.utils.html.escape`, which
  is what the template's autoescape does; the frame is byte for byte what
  `render_to_string` would give. The template stays the one place the ids and
  `hx-swap-oob` targets are written.
- `FrameRelay` sends the text in frames of its own task, at most one per `interval`: text
  that arrives while a frame is being sent or within the interval after it joins the next
  frame. A chunk after a quiet spell goes out at once; only text arriving hard on the heels
  of a frame waits, at most one interval. The browser shows the same text: the deltas of a
  frame are appended in order, and the stored answer replaces them at the end. The relay
  sleeps only when text comes within the interval: a timer per frame (a libuv handle each
  under uvloop) was a visible part of the per-chunk cost at 200 streams.

At a steady 50 chunks/s a stream's chunks are 20 ms apart, so a 5 ms interval merges
nothing and delays nothing; it merges the bursts that a busy process reads several chunks
at a time (the more load, the fewer frames), and the bursts some providers send.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

from django.template.loader import render_to_string
from django.utils.html import escape

from playground.providers.events import ReasoningDelta, StreamEvent, TextDelta

MARKER = "DELTA-TEXT-7f3c"  # survives escaping unchanged
TEMPLATES: dict[type[TextDelta | ReasoningDelta], str] = {
    ReasoningDelta: "chat/ws/reasoning_delta.html",
    TextDelta: "chat/ws/text_delta.html",
}


class DeltaFrames:
    """The delta fragments of one streaming answer, rendered once, filled in per frame."""

    def __init__(self, context: dict[str, Any]) -> None:
        self._parts: dict[type[TextDelta | ReasoningDelta], tuple[str, str]] = {}
        for kind, template in TEMPLATES.items():
            head, marker, tail = render_to_string(template, {**context, "text": MARKER}).partition(MARKER)
            if not marker or MARKER in tail:
                raise ValueError(f"{template} must show its text exactly once")
            self._parts[kind] = (head, tail)

    def render(self, kind: type[TextDelta | ReasoningDelta], text: str) -> str:
        """What `render_to_string(TEMPLATES[kind], {..., "text": text})` returns."""
        head, tail = self._parts[kind]
        return head + escape(text) + tail


class FrameRelay:
    """Collects the text of streamed deltas and sends it in frames from a task of its own.

    Use as `async with`: on a normal exit every collected text has been sent; on an
    exception (a Stop or a disconnect cancels the turn) the unsent rest is dropped, since
    the stored answer replaces the streamed text anyway. A failed send ends the relay, and
    the next `add` raises its error, so the turn stops reading as it did when it sent inline.
    """

    def __init__(
        self, frames: DeltaFrames, send: Callable[[str], Awaitable[None]], *, interval: float
    ) -> None:
        self._frames = frames
        self._send = send
        self._interval = interval
        self._pending: dict[type[TextDelta | ReasoningDelta], list[str]] = {kind: [] for kind in TEMPLATES}
        self._ready = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> FrameRelay:
        self._task = asyncio.create_task(self._run(), name="chat-frame-relay")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        assert self._task is not None
        if exc_type is not None:  # a Stop, a disconnect or a failure: the rest is not sent
            self._task.cancel()
            await asyncio.wait({self._task})
            if not self._task.cancelled():
                self._task.exception()  # retrieved and dropped: the turn's own error is the one raised
            return
        self._closing = True
        self._ready.set()
        await self._task

    def add(self, event: StreamEvent) -> None:
        """Queue a delta's text for the next frame; other events show only at the end."""
        assert self._task is not None
        if self._task.done():
            self._task.result()  # the relay failed: raise its error here
        if isinstance(event, TextDelta | ReasoningDelta) and event.text:
            self._pending[type(event)].append(event.text)
            self._ready.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        sent_at = -math.inf
        while True:
            await self._ready.wait()
            if not self._closing and (wait := sent_at + self._interval - loop.time()) > 0:
                await asyncio.sleep(wait)  # text hard on the heels of a frame joins the next one
            self._ready.clear()
            frame = "".join(
                self._frames.render(kind, "".join(texts)) for kind, texts in self._pending.items() if texts
            )
            for texts in self._pending.values():
                texts.clear()
            if frame:
                await self._send(frame)
                sent_at = loop.time()
            if self._closing and not self._ready.is_set():
                return
