"""Edit and regenerate over the chat WebSocket: the replaced messages leave the page, the new
branch streams in their place with its "< n / n >", and a message that is not this
conversation's is refused with nothing sent."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from playground.chat.models import Conversation, Message, MessageRole
from tests.fakes.upstream import FakeUpstream, native_frame, sse, usage
from tests.support.sockets import FINISHED, Socket

pytestmark = pytest.mark.django_db(transaction=True)

OpenSocket = Callable[[str | None, int], Socket]


async def turn(socket: Socket, **command: object) -> list[str]:
    await socket.send(**command)
    return await socket.receive_until(FINISHED)


async def test_an_edit_replaces_the_branch_on_the_page_and_the_answer_shows_its_cached_share(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    socket = open_socket("owner", conversation.pk)
    assert (await socket.connect())[0]
    await turn(socket, action="send", message="One")
    await turn(socket, action="send", message="Two")
    one = await Message.objects.aget(conversation=conversation, content="One")
    two = await Message.objects.aget(conversation=conversation, content="Two")
    two_answer = await Message.objects.aget(parent=two)
    fake_upstream.script(
        sse([native_frame("Edited answer"), native_frame("", usage=usage(40, 2, cached=10))])
    )

    started, *_, finished = await turn(socket, action="edit", message_id=str(one.pk), message="One, edited")
    await socket.disconnect()

    for gone in (one.pk, two.pk, two_answer.pk):
        assert f'<div id="message-{gone}" hx-swap-oob="delete"></div>' in started
    edited = await Message.objects.aget(conversation=conversation, content="One, edited")
    assert edited.parent_id is None
    assert f'id="message-{edited.pk}"' in started and '<span class="branch-position">2 / 2</span>' in started
    assert [m["content"] for m in fake_upstream.requests[-1].json["messages"]] == ["Be brief.", "One, edited"]
    assert "Edited answer" in finished and "10 cached (25%)" in finished


async def test_a_regenerated_answer_replaces_the_old_one_and_shows_two_of_two(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    socket = open_socket("owner", conversation.pk)
    assert (await socket.connect())[0]
    await turn(socket, action="send", message="Hello")
    old = await Message.objects.aget(conversation=conversation, role=MessageRole.ASSISTANT)

    started, *_, finished = await turn(socket, action="regenerate", message_id=str(old.pk))
    await socket.disconnect()

    assert f'<div id="message-{old.pk}" hx-swap-oob="delete"></div>' in started
    assert "message-user" not in started, "the question stays where it is"
    assert '<span class="branch-position">2 / 2</span>' in finished
    first, second = fake_upstream.requests
    assert first.json["messages"] == second.json["messages"]


async def test_editing_or_regenerating_another_conversations_message_is_refused_and_sends_nothing(
    open_socket: OpenSocket,
    conversation: Conversation,
    other_conversation: Conversation,
    fake_upstream: FakeUpstream,
) -> None:
    theirs = await Message.objects.acreate(
        conversation=other_conversation, role=MessageRole.USER, content="Theirs"
    )
    socket = open_socket("owner", conversation.pk)
    assert (await socket.connect())[0]

    await socket.send(action="edit", message_id=str(theirs.pk), message="Mine now")
    edit_notice = await socket.receive()
    await socket.send(action="regenerate", message_id=str(theirs.pk))
    regenerate_notice = await socket.receive()
    await socket.disconnect()

    for notice in (edit_notice, regenerate_notice):
        assert "That message is not in this conversation" in notice
    assert fake_upstream.requests == []
    assert await Message.objects.acount() == 1


async def test_a_page_showing_another_branch_than_the_last_continued_sends_its_own(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    """Two tabs: one still shows "One" and its answer; the other went on with "Two". The first
    tab's message follows what it shows, as a new branch beside "Two"."""
    socket = open_socket("owner", conversation.pk)
    assert (await socket.connect())[0]
    await turn(socket, action="send", message="One")
    first_answer = await Message.objects.aget(conversation=conversation, role=MessageRole.ASSISTANT)
    finished = (await turn(socket, action="send", message="Two"))[-1]
    assert 'id="composer-after" value="' in finished  # the page's composer follows the stored answer

    await turn(socket, action="send", message="Instead of Two", after=str(first_answer.pk))
    await socket.disconnect()

    sent = [m["content"] for m in fake_upstream.requests[-1].json["messages"]]
    assert sent == ["Be brief.", "One", fake_upstream.default_text, "Instead of Two"]
    instead = await Message.objects.aget(content="Instead of Two")
    two = await Message.objects.aget(content="Two")
    assert instead.parent_id == two.parent_id == first_answer.pk


async def test_a_send_after_another_conversations_message_is_refused(
    open_socket: OpenSocket,
    conversation: Conversation,
    other_conversation: Conversation,
    fake_upstream: FakeUpstream,
) -> None:
    theirs = await Message.objects.acreate(
        conversation=other_conversation, role=MessageRole.USER, content="Theirs"
    )
    socket = open_socket("owner", conversation.pk)
    assert (await socket.connect())[0]

    await socket.send(action="send", message="Hello", after=str(theirs.pk))
    notice = await socket.receive()
    await socket.disconnect()

    assert "That message is not in this conversation" in notice
    assert fake_upstream.requests == [] and await Message.objects.acount() == 1
