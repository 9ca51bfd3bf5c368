"""Messages written straight into a conversation, as the turn services write them: each after
the last message of the branch on screen, which it then ends."""

from __future__ import annotations

from typing import Any

from playground.chat.models import Conversation, Message


def message_append(*, conversation: Conversation, **fields: Any) -> Message:
    """A message saved after the conversation's current leaf, becoming the new leaf."""
    conversation.refresh_from_db(fields=["current_leaf"])
    message = Message.objects.create(
        conversation=conversation, parent_id=conversation.current_leaf_id, **fields
    )
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf=message)
    conversation.current_leaf = message
    return message
