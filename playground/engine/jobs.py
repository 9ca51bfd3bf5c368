"""A job as the front end sees it: a spec, a stream of events, and a way to cancel it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from playground.engine.batch_queue import QueuedItem
from playground.engine.protocol import Event, Failed, Finished, GenerationSpec, Started, TextDelta, ToolCall


class Job:
    def __init__(self, spec: GenerationSpec, *, batch_item: QueuedItem | None = None) -> None:
        self.id = uuid.uuid4().hex
        self.spec = spec
        self.batch_item = batch_item
        self.replica_index: int | None = None  # where it waits or runs
        self.crashed = False  # its replica died under it
        self.on_cancel: Callable[[Job], None] = lambda job: None
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def deliver(self, event: Event) -> None:
        if self.done.done():
            return
        self._events.put_nowait(event)
        if isinstance(event, Finished | Failed):
            self.done.set_result(None)

    async def next_event(self) -> Event:
        return await self._events.get()

    async def events(self) -> AsyncIterator[Event]:
        """The remaining events, ending with the terminal one."""
        while True:
            event = await self.next_event()
            yield event
            if isinstance(event, Finished | Failed):
                return

    def cancel(self) -> None:
        if not self.done.done():
            self.on_cancel(self)


@dataclass
class Outcome:
    """A whole answer, for the non-streaming routes and the batch queue."""

    end: Finished | Failed
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)


async def collect(events: AsyncIterator[Event]) -> Outcome:
    parts: list[str] = []
    calls: list[ToolCall] = []
    async for event in events:
        if isinstance(event, TextDelta):
            parts.append(event.text)
        elif isinstance(event, ToolCall):
            calls.append(event)
        elif isinstance(event, Finished | Failed):
            return Outcome(end=event, text="".join(parts), calls=calls)
        elif not isinstance(event, Started):
            raise TypeError(f"unexpected event {event!r}")
    raise RuntimeError("a job's events ended without a Finished or Failed event")
