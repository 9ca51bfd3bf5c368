"""What `chat_turn_start` refuses before anything is saved or sent, and what it sends."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.core.exceptions import ValidationError

from playground.catalog.seed import ENGINE_MODEL_ID
from playground.chat.models import Conversation, Message, MessageRole
from playground.chat.services.conversations import MessageNotFound, conversation_create
from playground.chat.services.history import HISTORY_MAX_MESSAGES, upstream_messages
from playground.chat.services.turns import MAX_MESSAGE_CHARS, chat_turn_start
from playground.providers.models import ProviderConnection
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.messages import message_append
from tests.support.sockets import Socket

LLAMA_24K = "@cf/meta/llama-3.3-70b-instruct-fp8-fast"  # a 24,000-token context window


@pytest.fixture
def long_engine_conversation(actors: Actors, engine_connection: ProviderConnection) -> Conversation:
    """32,000 characters of history (8,000 tokens) for a model that reads 8,192 (the engine's default)."""
    conversation = conversation_create(
        user=actors.owner, connection_id=engine_connection.pk, model_id=ENGINE_MODEL_ID
    )
    message_append(conversation=conversation, role=MessageRole.USER, content="x" * 20_000)
    message_append(conversation=conversation, role=MessageRole.ASSISTANT, content="y" * 12_000)
    return conversation


@pytest.mark.django_db
def test_a_message_of_exactly_the_cap_is_accepted_and_one_character_more_is_refused(
    actors: Actors, conversation: Conversation
) -> None:
    with pytest.raises(ValidationError, match="at most 100,000 characters"):
        chat_turn_start(
            user=actors.owner, conversation_id=conversation.pk, text="x" * (MAX_MESSAGE_CHARS + 1)
        )
    assert not Message.objects.exists()

    turn = chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text="x" * MAX_MESSAGE_CHARS)

    assert len(turn.user_message.content) == MAX_MESSAGE_CHARS


@pytest.mark.parametrize("bad", ["\ud800", "\udfff", "\x00"])
@pytest.mark.django_db
def test_a_message_with_an_unstorable_character_is_refused(
    actors: Actors, conversation: Conversation, bad: str
) -> None:
    with pytest.raises(ValidationError, match="cannot be stored"):
        chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text=f"hi {bad}")

    assert not Message.objects.exists()


@pytest.mark.django_db
def test_a_prompt_larger_than_the_context_window_is_refused_with_the_estimate_and_the_limit(
    actors: Actors, long_engine_conversation: Conversation
) -> None:
    with pytest.raises(ValidationError) as refused:
        chat_turn_start(user=actors.owner, conversation_id=long_engine_conversation.pk, text="z" * 772)

    assert refused.value.messages == [
        "Not sent: the prompt is 8,193 tokens (estimated), but the model's context window is 8,192 tokens "
        "(per the catalogue). Send a shorter message or start a new conversation."
    ]
    assert Message.objects.count() == 2  # the refused message was not saved


@pytest.mark.django_db
def test_a_prompt_just_inside_the_context_window_is_sent(
    actors: Actors, long_engine_conversation: Conversation
) -> None:
    turn = chat_turn_start(user=actors.owner, conversation_id=long_engine_conversation.pk, text="z" * 764)

    assert turn.call.request.prompt_chars == 32_764  # 8,191 tokens


@pytest.mark.django_db
def test_a_model_the_catalogue_does_not_know_is_not_checked(
    actors: Actors, engine_connection: ProviderConnection
) -> None:
    conversation = conversation_create(
        user=actors.owner, connection_id=engine_connection.pk, model_id="@local/other"
    )
    message_append(conversation=conversation, role=MessageRole.USER, content="x" * 100_000)
    message_append(conversation=conversation, role=MessageRole.ASSISTANT, content="x" * 100_000)

    turn = chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text="more")

    assert turn.call.request.prompt_chars == 200_004


@pytest.mark.django_db
def test_only_the_most_recent_history_is_sent_after_the_system_prompt(
    actors: Actors, conversation: Conversation
) -> None:
    for i in range(HISTORY_MAX_MESSAGES + 6):
        message_append(
            conversation=conversation,
            role=MessageRole.ASSISTANT if i % 2 else MessageRole.USER,
            content=f"m{i}",
        )

    messages = upstream_messages(conversation)

    assert len(messages) == 1 + HISTORY_MAX_MESSAGES
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert [m["content"] for m in messages[1:3]] == ["m6", "m7"]
    assert messages[-1]["content"] == f"m{HISTORY_MAX_MESSAGES + 5}"


@pytest.mark.django_db(transaction=True)
async def test_a_socket_turn_that_cannot_fit_is_refused_with_a_notice_and_nothing_is_sent(
    open_socket: Callable[[str | None, int], Socket],
    actors: Actors,
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
) -> None:
    conversation = await Conversation.objects.acreate(
        team=actors.team, user=actors.owner, connection=workers_connection, model_id=LLAMA_24K
    )
    socket = open_socket("owner", conversation.pk)
    await socket.connect()

    await socket.send(action="send", message="x" * 96_000)
    notice = await socket.receive()
    await socket.disconnect()

    assert "the prompt is 24,000 tokens (estimated)" in notice
    assert "context window is 24,000 tokens (per the catalogue)" in notice
    assert fake_upstream.requests == []
    assert not await Message.objects.filter(conversation=conversation).aexists()


@pytest.mark.django_db
def test_a_question_after_a_message_already_continued_starts_a_branch_beside_the_continuation(
    actors: Actors, conversation: Conversation, other_conversation: Conversation
) -> None:
    message_append(conversation=conversation, role=MessageRole.USER, content="One?")
    answer = message_append(conversation=conversation, role=MessageRole.ASSISTANT, content="1")
    continued = message_append(conversation=conversation, role=MessageRole.USER, content="Two?")
    theirs = message_append(conversation=other_conversation, role=MessageRole.USER, content="Theirs")

    turn = chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text="Deux ?", after=answer.pk)

    assert turn.user_message.parent_id == answer.pk
    assert turn.question_siblings == [continued.pk, turn.user_message.pk]
    assert [m["content"] for m in turn.call.request.messages[1:]] == ["One?", "1", "Deux ?"]
    latest = chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text="Trois ?")
    assert latest.user_message.parent_id == turn.user_message.pk  # the new branch is the one on screen
    assert latest.question_siblings == [latest.user_message.pk]
    with pytest.raises(MessageNotFound):
        chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text="x", after=theirs.pk)
