"""Reads of conversations, always scoped to the acting user's teams."""

from __future__ import annotations

from django.db.models import QuerySet

from playground.accounts.selectors import AnyUser
from playground.chat.models import Attachment, Conversation, Message
from playground.usage.models import UsageRecord


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
    # Request bodies hold the whole history each: loaded one at a time by `message_request_get`.
    return (
        conversation.messages.select_related("usage_record", "usage_record__price_card")
        .defer("usage_record__request_body")
        .prefetch_related("attachments")
    )


def message_request_get(*, user: AnyUser, conversation_id: int, message_id: int) -> UsageRecord | None:
    """The usage record of one answer, with its request body, if the user's team owns it."""
    conversation = conversation_get(user=user, conversation_id=conversation_id)
    if conversation is None:
        return None
    message = (
        conversation.messages.filter(pk=message_id, usage_record__isnull=False)
        .select_related("usage_record")
        .first()
    )
    return message.usage_record if message is not None else None


def attachment_get(*, user: AnyUser, attachment_id: int) -> Attachment | None:
    """The image if one of the user's teams owns its conversation (any role, viewers too);
    None otherwise (callers answer 404)."""
    if not user.is_authenticated:
        return None
    return (
        Attachment.objects.filter(pk=attachment_id, conversation__team__memberships__user_id=user.pk)
        .select_related("conversation")
        .first()
    )
