"""Chat actions: start conversations, and run one turn against the upstream.

A turn is `chat_turn_start` (sync: checks, saves the user's message, builds the request)
then `ChatTurn.events()` (async: streams normalized events). However the stream ends —
answer, upstream error, timeout, Stop, or a client that went away — `events()` writes the
assistant message and the usage record in its `finally`, shielded from cancellation.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from playground.accounts.models import ROLES_THAT_CAN_RUN
from playground.accounts.selectors import membership_get
from playground.asyncutil import finish_even_if_cancelled
from playground.chat.models import Conversation, Message, MessageRole
from playground.chat.selectors import conversation_get
from playground.providers.adapters import ChatAdapter, ChatRequest, adapter_for
from playground.providers.events import ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta, UpstreamError
from playground.providers.selectors import connection_get
from playground.usage.metering import UsageMeter
from playground.usage.models import UsageRecord
from playground.usage.services import RequestContext, ausage_record_create

MAX_MESSAGE_CHARS = 100_000
TITLE_CHARS = 80


class ConversationNotFound(Exception):
    """No conversation with that id in the user's teams (answered as 404)."""


def conversation_create(
    *,
    user: User,
    connection_id: int,
    model_id: str,
    system_prompt: str = "",
    use_affinity: bool = True,
) -> Conversation:
    connection = connection_get(user=user, connection_id=connection_id)
    if connection is None:
        raise ValidationError({"connection": "Choose one of your team's connections."})
    _require_run_role(user=user, team_id=connection.team_id)
    model_id = model_id.strip()
    if not model_id:
        raise ValidationError({"model_id": "Choose a model."})
    return Conversation.objects.create(
        team_id=connection.team_id,
        user=user,
        connection=connection,
        model_id=model_id,
        system_prompt=system_prompt,
        use_affinity=use_affinity,
        affinity_key=f"pg-{uuid.uuid4().hex}",
    )


def conversation_settings_update(*, user: User, conversation_id: int, use_affinity: bool) -> Conversation:
    conversation = _conversation_for_run(user=user, conversation_id=conversation_id)
    conversation.use_affinity = use_affinity
    conversation.save(update_fields=["use_affinity", "updated_at"])
    return conversation


@dataclass
class ChatTurn:
    """One request/answer exchange. `assistant_message` is set once `events()` has ended."""

    conversation: Conversation
    user_message: Message
    adapter: ChatAdapter
    request: ChatRequest
    context: RequestContext
    assistant_message: Message | None = None
    _text: list[str] = field(default_factory=list)
    _reasoning: list[str] = field(default_factory=list)

    async def events(self) -> AsyncGenerator[StreamEvent]:
        meter = UsageMeter(prompt_chars=sum(len(str(m.get("content") or "")) for m in self.request.messages))
        cancelled = True  # until the stream ends by itself
        try:
            async with aclosing(self.adapter.stream(self.request)) as upstream:
                async for event in upstream:
                    meter.observe(event)
                    self._collect(event)
                    yield event
            cancelled = False
        finally:
            record = await ausage_record_create(
                context=self.context, outcome=meter.outcome(cancelled=cancelled)
            )
            self.assistant_message = await finish_even_if_cancelled(sync_to_async(self._save_answer)(record))

    def _collect(self, event: StreamEvent) -> None:
        match event:
            case TextDelta(text=text):
                self._text.append(text)
            case ReasoningDelta(text=text):
                self._reasoning.append(text)
            case ToolCallDelta():
                pass  # tool calls get their own editor in a later issue; the record counts them
            case UpstreamError():
                pass  # the usage record keeps the (redacted) error text

    def _save_answer(self, record: UsageRecord) -> Message:
        with transaction.atomic():
            message = Message.objects.create(
                conversation=self.conversation,
                role=MessageRole.ASSISTANT,
                content="".join(self._text),
                reasoning="".join(self._reasoning),
                usage_record=record,
            )
            Conversation.objects.filter(pk=self.conversation.pk).update(updated_at=message.created_at)
        return message


def chat_turn_start(*, user: User, conversation_id: int, text: str) -> ChatTurn:
    """Check the user may send, save their message, and build the upstream request.

    Blocking (ORM, decrypting the token, resolving the host): call via `sync_to_async`.
    Raises `ConversationNotFound`, `PermissionDenied` or `ValidationError`.
    """
    text = text.strip()
    if not text:
        raise ValidationError("Type a message first.")
    if len(text) > MAX_MESSAGE_CHARS:
        raise ValidationError(f"A message can be at most {MAX_MESSAGE_CHARS:,} characters.")
    conversation = _conversation_for_run(user=user, conversation_id=conversation_id)
    connection = conversation.connection
    if connection is None:
        raise ValidationError("This conversation's connection was deleted; start a new conversation.")
    adapter = adapter_for(connection)
    with transaction.atomic():
        user_message = Message.objects.create(conversation=conversation, role=MessageRole.USER, content=text)
        if not conversation.title:
            conversation.title = text[:TITLE_CHARS]
        conversation.save(update_fields=["title", "updated_at"])
    affinity_key = conversation.affinity_key if conversation.use_affinity else ""
    request = ChatRequest(
        model=conversation.model_id, messages=upstream_messages(conversation), affinity_key=affinity_key
    )
    context = RequestContext(
        team_id=conversation.team_id,
        user_id=user.pk,
        connection_id=connection.pk,
        model_id=conversation.model_id,
        conversation_id=conversation.pk,
        affinity_key=affinity_key,
        streamed=request.stream,
    )
    return ChatTurn(
        conversation=conversation,
        user_message=user_message,
        adapter=adapter,
        request=request,
        context=context,
    )


def upstream_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """The history in OpenAI message shape, system prompt first so the prefix stays cacheable.

    Failed answers (no text) are left out: sending an empty assistant turn confuses models.
    """
    messages: list[dict[str, Any]] = []
    if conversation.system_prompt.strip():
        messages.append({"role": "system", "content": conversation.system_prompt})
    for message in conversation.messages.all():
        if message.content:
            messages.append({"role": message.role, "content": message.content})
    return messages


def _conversation_for_run(*, user: User, conversation_id: int) -> Conversation:
    conversation = conversation_get(user=user, conversation_id=conversation_id)
    if conversation is None:
        raise ConversationNotFound(conversation_id)
    _require_run_role(user=user, team_id=conversation.team_id)
    return conversation


def _require_run_role(*, user: User, team_id: int) -> None:
    membership = membership_get(user=user, team_id=team_id)
    if membership is None or membership.role not in ROLES_THAT_CAN_RUN:
        raise PermissionDenied("Viewers can read this team's conversations but not send requests.")
