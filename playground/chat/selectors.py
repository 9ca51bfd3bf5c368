"""Reads of conversations, always scoped to the acting user's teams."""

from __future__ import annotations

from django.db.models import QuerySet

from playground.accounts.selectors import AnyUser
from playground.chat.models import Conversation, Message


def conversation_list(*, user: AnyUser) -> QuerySet[Conversation]:
    if not user.is_authenticated:
        return Conversation.objects.none()
    return Conversation.objects.filter(team__memberships__user_id=user.pk).select_related(
        "team", "connection"
    )


def conversation_get(*, user: AnyUser, conversation_id: int) -> Conversation | None:
    """The conversation if one of the user's teams owns it; None otherwise (callers answer 404)."""
    return conversation_list(user=user).filter(pk=conversation_id).first()


async def aconversation_get(*, user: AnyUser, conversation_id: int) -> Conversation | None:
    return await conversation_list(user=user).filter(pk=conversation_id).afirst()


def message_list(*, conversation: Conversation) -> QuerySet[Message]:
    """A conversation's messages with their usage records (the caller already checked access)."""
    return conversation.messages.select_related("usage_record", "usage_record__price_card")
