"""A WebSocket client on the real ASGI application, and a turn that is still streaming."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from channels.testing import WebsocketCommunicator

from tests.fakes.upstream import FakeUpstream, native_frame, sse

FRAME_TIMEOUT = 5
FINISHED = 'hx-swap-oob="outerHTML:#answer-'  # the stored answer replaces the streamed one


@dataclass
class Socket:
    """A WebSocket client on the real ASGI application (origin check, session auth, routing)."""

    communicator: WebsocketCommunicator
    frames: list[str]

    async def connect(self) -> tuple[bool, int | str | None]:
        return await self.communicator.connect(timeout=FRAME_TIMEOUT)

    async def send(self, **data: Any) -> None:
        await self.communicator.send_to(text_data=json.dumps(data))

    async def send_raw(self, text: str) -> None:
        await self.communicator.send_to(text_data=text)

    async def receive(self) -> str:
        frame = await self.communicator.receive_from(timeout=FRAME_TIMEOUT)
        self.frames.append(frame)
        return frame

    async def receive_until(self, marker: str) -> list[str]:
        """Frames up to and including the first that contains `marker`."""
        frames = []
        while True:
            frame = await self.receive()
            frames.append(frame)
            if marker in frame:
                return frames

    async def disconnect(self) -> None:
        await self.communicator.disconnect(timeout=FRAME_TIMEOUT)

    async def exchange(self, message: str) -> list[str]:
        """Connect, send `message`, and return the frames up to the stored answer."""
        connected, _ = await self.connect()
        assert connected
        await self.send(action="send", message=message)
        frames = await self.receive_until(FINISHED)
        await self.disconnect()
        return frames


SLOW_WORDS = [native_frame(f"word{i} ") for i in range(30)]


async def slow_turn_started(socket: Socket, upstream: FakeUpstream, message: str = "Count slowly") -> None:
    """Connect `socket` and start a turn whose upstream sends a word every 0.2 s; returns once
    the first word has arrived, so the upstream request is under way (the budget is reserved
    before it is sent)."""
    upstream.script(sse(SLOW_WORDS, delay=0.2))
    await socket.connect()
    await socket.send(action="send", message=message)
    await socket.receive()  # the turn has started
    await socket.receive()  # its first word
