"""The chat socket's doors: its Origin, a session that ended, frame size and turn limits."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import LazySettings, settings
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session

from playground.chat.models import Conversation, Message, MessageRole
from playground.providers.models import ProviderConnection
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.sockets import FINISHED, Socket, slow_turn_started

pytestmark = pytest.mark.django_db(transaction=True)

OpenSocket = Callable[[str | None, int], Socket]


def socket_from(origin: str | None, host: str, cookie: str, conversation_id: int) -> WebsocketCommunicator:
    from playground.asgi import application

    headers = [(b"host", host.encode()), (b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return WebsocketCommunicator(application, f"/ws/chat/{conversation_id}/", headers=headers)


# --- E: the Origin must be this site's own: scheme, host and port -----------------------------


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        ("http://localhost", "localhost", True),
        ("http://localhost:8000", "localhost:8000", True),
        ("http://localhost:3000", "localhost:8000", False),  # another app on the same host
        ("http://localhost:8000", "localhost", False),
        ("https://localhost", "localhost", False),  # another scheme
        ("http://evil.example", "localhost", False),
        ("http://localhost", "evil.example", False),  # a Host outside ALLOWED_HOSTS
        ("null", "localhost", False),
        (None, "localhost", False),
    ],
)
async def test_a_socket_opens_only_from_the_sites_own_origin(
    conversation: Conversation, session_cookies: dict[str, str], origin: str | None, host: str, allowed: bool
) -> None:
    communicator = socket_from(origin, host, session_cookies["owner"], conversation.pk)

    connected, _ = await communicator.connect(timeout=5)
    await communicator.disconnect()

    assert connected is allowed


async def test_an_origin_in_csrf_trusted_origins_may_open_a_socket(
    conversation: Conversation, session_cookies: dict[str, str], settings: LazySettings
) -> None:
    settings.CSRF_TRUSTED_ORIGINS = ["https://playground.example.com"]
    communicator = socket_from(
        "https://playground.example.com", "localhost", session_cookies["owner"], conversation.pk
    )

    connected, _ = await communicator.connect(timeout=5)
    await communicator.disconnect()

    assert connected


# --- F: every message re-checks the session and the account --------------------------------


async def signed_out_by_logout(user: User) -> None:
    await Session.objects.all().adelete()  # what logging out (here or in another tab) does


async def signed_out_by_deactivation(user: User) -> None:
    await User.objects.filter(pk=user.pk).aupdate(is_active=False)


async def signed_out_by_password_change(user: User) -> None:
    user.set_password("a-new-password-123")
    await user.asave(update_fields=["password"])


@pytest.mark.parametrize(
    "sign_out",
    [signed_out_by_logout, signed_out_by_deactivation, signed_out_by_password_change],
    ids=["logged out", "account deactivated", "password changed"],
)
async def test_a_socket_whose_session_ended_refuses_the_next_message_and_closes(
    open_socket: OpenSocket,
    actors: Actors,
    conversation: Conversation,
    fake_upstream: FakeUpstream,
    sign_out: Callable[[User], object],
) -> None:
    socket = open_socket("owner", conversation.pk)
    assert (await socket.connect())[0]
    await sign_out(actors.owner)  # type: ignore[misc]

    await socket.send(action="send", message="Still here?")
    notice = await socket.receive()
    closed = await socket.communicator.receive_output(timeout=5)

    assert "You are signed out" in notice
    assert closed == {"type": "websocket.close", "code": 4401}
    assert fake_upstream.requests == []
    assert not await Message.objects.filter(conversation=conversation).aexists()


async def test_signing_out_mid_answer_stops_the_turn_at_the_next_message(
    open_socket: OpenSocket, actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    socket = open_socket("owner", conversation.pk)
    await slow_turn_started(socket, fake_upstream)
    await signed_out_by_deactivation(actors.owner)

    await socket.send(action="stop")
    frames = await socket.receive_until("You are signed out")

    assert (await fake_upstream.wait_ended(0)).disconnected
    assert all("word29" not in frame for frame in frames)


# --- case 17: frame size, turn rate, concurrent turns -----------------------------------------


async def test_an_oversized_frame_is_refused_with_its_size_and_the_socket_stays_open(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream, settings: LazySettings
) -> None:
    settings.CHAT_MAX_FRAME_BYTES = 64 * 1024
    socket = open_socket("owner", conversation.pk)
    await socket.connect()

    await socket.send_raw(json.dumps({"action": "send", "message": "x" * 100_000}))
    notice = await socket.receive()
    await socket.send(action="send", message="A normal one")
    frames = await socket.receive_until(FINISHED)
    await socket.disconnect()

    assert "That message is 97 KB; the limit is 64 KB. Not sent." in notice
    assert len(fake_upstream.requests) == 1
    assert "Hello from the fake upstream." in frames[-1]


async def test_turns_beyond_the_per_minute_rate_are_refused_saying_when_to_retry(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream, settings: LazySettings
) -> None:
    settings.CHAT_TURNS_PER_MINUTE = 2
    socket = open_socket("owner", conversation.pk)
    await socket.connect()
    for text in ("One", "Two"):
        await socket.send(action="send", message=text)
        await socket.receive_until(FINISHED)

    await socket.send(action="send", message="Three")
    notice = await socket.receive()
    await socket.disconnect()

    assert "You have sent 2 messages this minute, the most allowed. Try again in" in notice
    assert len(fake_upstream.requests) == 2
    assert await Message.objects.filter(conversation=conversation, role=MessageRole.USER).acount() == 2


async def test_concurrent_turns_are_capped_per_user_across_sockets(
    open_socket: OpenSocket,
    actors: Actors,
    conversation: Conversation,
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    settings: LazySettings,
) -> None:
    settings.CHAT_MAX_CONCURRENT_TURNS = 1
    second = await Conversation.objects.acreate(
        team=actors.team, user=actors.owner, connection=workers_connection, model_id=conversation.model_id
    )
    first_tab, second_tab = open_socket("owner", conversation.pk), open_socket("owner", second.pk)
    await second_tab.connect()
    await slow_turn_started(first_tab, fake_upstream)

    await second_tab.send(action="send", message="Me too")
    refused = await second_tab.receive()
    await first_tab.send(action="stop")
    await first_tab.receive_until(FINISHED)
    await second_tab.send(action="send", message="Now?")  # the slot is free again
    answered = await second_tab.receive_until(FINISHED)
    await first_tab.disconnect()
    await second_tab.disconnect()

    assert "You already have 1 answer streaming (in this or other tabs)" in refused
    assert "Hello from the fake upstream." in answered[-1]
    assert len(fake_upstream.requests) == 2


async def test_a_turn_slot_is_freed_even_when_the_socket_closes_as_the_answer_ends(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream, settings: LazySettings
) -> None:
    settings.CHAT_MAX_CONCURRENT_TURNS = 1
    for text in ("One", "Two", "Three", "Four", "Five", "Six"):  # each closes the tab at once
        frames = await open_socket("owner", conversation.pk).exchange(text)
        assert "Hello from the fake upstream." in frames[-1], f"{text!r} was refused: a slot leaked"
