"""The pre-flight and the send check count the prompt with the model's tokenizer and hold it to the
window the engine really serves (the real engine: 2,048 tokens, where the catalogue says 8,192)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.urls import reverse

from playground.catalog.seed import ENGINE_MODEL_ID
from playground.chat.models import Conversation, Message
from playground.chat.services.conversations import conversation_create
from playground.chat.services.preflight import preflight_for
from playground.chat.services.turns import chat_turn_start
from playground.providers.models import ProviderConnection
from playground.usage.metering import estimate_tokens
from playground.usage.models import UsageRecord
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db

QUESTION = "What is the capital of France?"
TOO_LONG = "lorem " * 1300  # 2,600 tokens for SmolLM2 (two a word); 1,950 by the characters ÷ 4 estimate


@pytest.fixture
def engine_chat(actors: Actors, served_engine: ProviderConnection) -> Conversation:
    return conversation_create(
        user=actors.owner, connection_id=served_engine.pk, model_id=ENGINE_MODEL_ID, system_prompt="Be brief."
    )


def preflight_html(actors: Actors, conversation: Conversation, text: str) -> str:
    response = client_for(actors.owner).post(
        reverse("chat:preflight", args=[conversation.pk]), {"message": text}
    )
    return response.content.decode()


def test_the_engine_prompt_is_counted_as_the_answer_will_bill_it(
    actors: Actors, engine_chat: Conversation
) -> None:
    preflight = preflight_for(conversation=engine_chat, sender_id=actors.owner.pk, text=QUESTION)
    html = preflight_html(actors, engine_chat, QUESTION)

    turn = chat_turn_start(user=actors.owner, conversation_id=engine_chat.pk, text=QUESTION)

    async def drain() -> None:
        async for _ in turn.events():
            pass

    async_to_sync(drain)()
    assert preflight.prompt.counted and preflight.window is not None and preflight.window.served
    assert preflight.prompt_tokens == UsageRecord.objects.get().prompt_tokens
    assert f"{preflight.prompt_tokens:,} in (counted)" in html and "estimated" not in html


def test_a_message_that_cannot_fit_the_served_window_is_refused_before_anything_is_sent(
    actors: Actors, engine_chat: Conversation
) -> None:
    assert estimate_tokens(len(TOO_LONG)) < 2048  # an estimate would have let it through
    preflight = preflight_for(conversation=engine_chat, sender_id=actors.owner.pk, text=TOO_LONG)
    html = preflight_html(actors, engine_chat, TOO_LONG)

    with pytest.raises(ValidationError) as refused:
        chat_turn_start(user=actors.owner, conversation_id=engine_chat.pk, text=TOO_LONG)

    tokens = f"{preflight.prompt_tokens:,}"
    assert preflight.over_window and preflight.prompt_tokens > 2048
    assert (
        f"Send would be refused: the prompt is {tokens} tokens (counted), but the model&#x27;s context "
        "window is 2,048 tokens (as served). Shorten the message or start a new conversation." in html
    )
    assert refused.value.messages == [
        f"Not sent: the prompt is {tokens} tokens (counted), but the model's context window is 2,048 "
        "tokens (as served). Send a shorter message or start a new conversation."
    ]
    assert not Message.objects.exists() and not UsageRecord.objects.exists()


def test_max_tokens_must_fit_beside_the_prompt(actors: Actors, engine_chat: Conversation) -> None:
    engine_chat.parameters = {"max_tokens": 1500}
    engine_chat.save()
    text = "lorem " * 800  # fits alone, not with 1,500 tokens of answer

    preflight = preflight_for(conversation=engine_chat, sender_id=actors.owner.pk, text=text)
    html = preflight_html(actors, engine_chat, text)

    assert preflight.over_window and preflight.prompt_tokens + 1500 > 2048 > preflight.prompt_tokens
    assert "and max_tokens asks for 1,500 more, but the model&#x27;s context window is 2,048" in html
    assert "Shorten the message, lower max tokens or start a new conversation." in html
    with pytest.raises(ValidationError, match="lower max tokens"):
        chat_turn_start(user=actors.owner, conversation_id=engine_chat.pk, text=text)


def test_a_model_without_a_tokenizer_is_said_to_be_estimated(
    actors: Actors, conversation: Conversation
) -> None:
    html = preflight_html(actors, conversation, QUESTION)

    assert "in (estimated)" in html and "(counted)" not in html
