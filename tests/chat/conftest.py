"""Chat fixtures: conversations and sockets (connections to the fake upstream: tests/conftest.py).

Consumer tests are `django_db(transaction=True)`: the consumer reaches the database from
worker threads, which cannot see a test transaction that is never committed. A flush
after such a test also empties the seeded catalogue, so fixtures seed it again.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings

from playground.catalog.seed import KIMI_K26
from playground.chat.models import Conversation
from playground.chat.services.conversations import conversation_create
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_engine_ensure
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.connections import workers_connection_for
from tests.support.sockets import Socket


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
def session_cookies(actors: Actors) -> dict[str, str]:
    """A logged-in session cookie per actor (made here: async tests cannot use the sync ORM)."""
    cookies = {}
    for name, user in {
        "owner": actors.owner,
        "teammate": actors.teammate,
        "outsider": actors.outsider,
        "viewer": actors.viewer,
    }.items():
        client = client_for(user)
        cookies[name] = client.cookies[settings.SESSION_COOKIE_NAME].value
    return cookies


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
