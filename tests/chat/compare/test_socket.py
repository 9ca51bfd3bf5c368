"""The compare socket's doors, which it shares with the chat socket (`sockets.base.StreamingSocket`):
who may connect, a session that ended, one run at a time, and a run holding a concurrent-turn slot."""

from __future__ import annotations

import pytest
from django.conf import LazySettings
from django.contrib.sessions.models import Session

from playground.chat.compare.models import Comparison
from playground.chat.compare.services import Target, comparison_create
from playground.chat.models import Conversation
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord
from tests.chat.compare.conftest import RUN_END, OpenCompare
from tests.fakes.upstream import FakeUpstream, sse
from tests.support.actors import Actors
from tests.support.sockets import FINISHED, SLOW_WORDS, Socket

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def comparison(
    actors: Actors, workers_connection: ProviderConnection, conversation: Conversation
) -> Comparison:
    target = Target(workers_connection.pk, conversation.model_id, {"max_tokens": 64})
    return comparison_create(user=actors.owner, prompt="Count slowly.", targets=[target, target])


async def slow_run_started(socket: Socket, upstream: FakeUpstream) -> None:
    """Both columns' upstreams send a word every 0.2 s; returns once a first word is in."""
    upstream.script(sse(SLOW_WORDS, delay=0.2), sse(SLOW_WORDS, delay=0.2))
    assert (await socket.connect())[0]
    await socket.send(action="run")
    await socket.receive_until('-text" hx-swap-oob="beforeend"')


@pytest.mark.parametrize(
    ("actor", "code"), [(None, 4401), ("outsider", 4404)], ids=["visitor", "another team"]
)
async def test_a_visitor_and_another_teams_member_cannot_open_a_comparisons_socket(
    open_compare: OpenCompare, comparison: Comparison, actor: str | None, code: int
) -> None:
    connected, closed_with = await open_compare(actor, comparison.pk).connect()

    assert (connected, closed_with) == (False, code)


async def test_a_compare_socket_whose_session_ended_refuses_the_next_message_and_closes(
    open_compare: OpenCompare, comparison: Comparison, fake_upstream: FakeUpstream
) -> None:
    socket = open_compare("owner", comparison.pk)
    assert (await socket.connect())[0]
    await Session.objects.all().adelete()  # what logging out (here or in another tab) does

    await socket.send(action="run")
    notice = await socket.receive()
    closed = await socket.communicator.receive_output(timeout=5)

    assert "You are signed out" in notice
    assert closed == {"type": "websocket.close", "code": 4401}
    assert fake_upstream.requests == []


async def test_a_run_holds_one_turn_slot_and_a_second_waits_for_its_end(
    open_compare: OpenCompare,
    open_socket: OpenCompare,
    comparison: Comparison,
    conversation: Conversation,
    fake_upstream: FakeUpstream,
    settings: LazySettings,
) -> None:
    settings.CHAT_MAX_CONCURRENT_TURNS = 1
    compare, chat = open_compare("owner", comparison.pk), open_socket("owner", conversation.pk)
    assert (await chat.connect())[0]
    await slow_run_started(compare, fake_upstream)

    await compare.send(action="rerun")
    busy = await compare.receive_until("still running")
    await chat.send(action="send", message="Me too")
    refused = await chat.receive()
    await compare.send(action="stop")
    await compare.receive_until(RUN_END)
    await chat.send(action="send", message="Now?")  # the run gave its slot back
    answered = await chat.receive_until(FINISHED)
    await compare.disconnect()
    await chat.disconnect()

    assert "The comparison is still running: wait for it to finish, or press Stop." in busy[-1]
    assert "You already have 1 answer streaming (in this or other tabs)" in refused
    assert "Hello from the fake upstream." in answered[-1]
    assert len(fake_upstream.requests) == 3  # two columns, then the chat's turn
    assert await UsageRecord.objects.acount() == 3
