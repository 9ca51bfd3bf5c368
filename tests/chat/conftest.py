"""Chat fixtures: conversations and sockets (connections to the fake upstream: tests/conftest.py).

Consumer tests are `django_db(transaction=True)`: the consumer reaches the database from
worker threads, which cannot see a test transaction that is never committed. A flush
after such a test also empties the seeded catalogue, so fixtures seed it again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from playground.catalog.seed import KIMI_K26
from playground.chat.models import Conversation
from playground.chat.services.conversations import conversation_create
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_engine_ensure
from tests.conftest import Actors, workers_connection_for
from tests.fakes.upstream import FakeUpstream, native_frame, sse

FRAME_TIMEOUT = 5


@pytest.fixture
def engine_connection(actors: Actors, catalogue: None) -> ProviderConnection:
    return connection_engine_ensure(team=actors.team)


@pytest.fixture
def other_connection(actors: Actors, fake_upstream: FakeUpstream, catalogue: None) -> ProviderConnection:
    return workers_connection_for(
        actors.other_team, fake_upstream, name="Bravo Workers AI", token="cf-other-token"
    )


@pytest.fixture
def conversation(actors: Actors, workers_connection: ProviderConnection) -> Conversation:
    return conversation_create(
        user=actors.owner, connection_id=workers_connection.pk, model_id=KIMI_K26, system_prompt="Be brief."
    )


@pytest.fixture
def other_conversation(actors: Actors, other_connection: ProviderConnection) -> Conversation:
    return conversation_create(user=actors.outsider, connection_id=other_connection.pk, model_id=KIMI_K26)


@pytest.fixture
def session_cookies(actors: Actors, viewer: User) -> dict[str, str]:
    """A logged-in session cookie per actor (made here: async tests cannot use the sync ORM)."""
    cookies = {}
    for name, user in {
        "owner": actors.owner,
        "teammate": actors.teammate,
        "outsider": actors.outsider,
        "viewer": viewer,
    }.items():
        client = Client()
        client.force_login(user)
        cookies[name] = client.cookies[settings.SESSION_COOKIE_NAME].value
    return cookies


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


@pytest.fixture
def open_socket(session_cookies: dict[str, str]) -> Callable[[str | None, int], Socket]:
    from playground.asgi import application

    def make(actor: str | None, conversation_id: int) -> Socket:
        headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
        if actor is not None:
            cookie = f"{settings.SESSION_COOKIE_NAME}={session_cookies[actor]}"
            headers.append((b"cookie", cookie.encode()))
        communicator = WebsocketCommunicator(application, f"/ws/chat/{conversation_id}/", headers=headers)
        return Socket(communicator=communicator, frames=[])

    return make


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
