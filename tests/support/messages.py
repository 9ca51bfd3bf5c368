"""Messages written straight into a conversation, as the turn services write them: each after
the last message of the branch on screen, which it then ends."""

from __future__ import annotations

from typing import Any

from playground.chat.domain.attachments import attachment_store, attachments_link, image_clean
from playground.chat.models import Conversation, Message, MessageRole
from tests.support.images import png


def message_append(*, conversation: Conversation, **fields: Any) -> Message:
    """A message saved after the conversation's current leaf, becoming the new leaf."""
    conversation.refresh_from_db(fields=["current_leaf"])
    message = Message.objects.create(
        conversation=conversation, parent_id=conversation.current_leaf_id, **fields
    )
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf=message)
    conversation.current_leaf = message
    return message


# A tool with a saved mock, and a call of it as an answer stores it.
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    "mocks": ["Sunny, 21 °C"],
    "returns_json": False,
}
WEATHER_CALL: dict[str, Any] = {
    "index": 0,
    "id": "call_1",
    "name": "weather",
    "arguments": '{"city": "Oslo"}',
    "valid": True,
    "errors": [],
}


def picture_and_weather_append(conversation: Conversation, *, question: str = "Weather in Oslo?") -> None:
    """Two answered turns: a question with a picture (stored under MEDIA_ROOT), then `question`,
    answered by a call of `WEATHER_TOOL`, its result, and an answer."""
    picture = message_append(
        conversation=conversation, role=MessageRole.USER, content="What is in this picture?"
    )
    image = attachment_store(conversation=conversation, image=image_clean(png(64, 48)))
    attachments_link(message=picture, attachments=[image])
    message_append(conversation=conversation, role=MessageRole.ASSISTANT, content="A red rectangle.")
    message_append(conversation=conversation, role=MessageRole.USER, content=question)
    call = message_append(
        conversation=conversation, role=MessageRole.ASSISTANT, content="", tool_calls=[WEATHER_CALL]
    )
    message_append(
        conversation=conversation,
        role=MessageRole.TOOL,
        content="Sunny, 21 °C",
        reply_to=call,
        tool_call_index=0,
        tool_call_id="call_1",
    )
    message_append(conversation=conversation, role=MessageRole.ASSISTANT, content="Sunny in Oslo.")
