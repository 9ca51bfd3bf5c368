"""Chat actions: start conversations, and run one turn against the upstream.

A turn is `chat_turn_start` (sync: checks, saves the user's message, builds the request)
then `ChatTurn.events()` (async: streams normalized events) through the one metered call
(`playground.usage.metered_call`). However the stream ends (answer, upstream error,
timeout, Stop, a client that went away, or data nobody could read), the metered call
writes the usage record and then the assistant message, as one step shielded from
cancellation, and neither write can skip the other.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from playground.accounts.models import ROLES_THAT_CAN_RUN
from playground.accounts.selectors import membership_get
from playground.catalog.selectors import catalog_model_serving
from playground.chat.models import Conversation, Message, MessageRole
from playground.chat.selectors import conversation_get
from playground.providers.adapters import ChatRequest, adapter_for
from playground.providers.answer import AnswerCollector
from playground.providers.events import StreamEvent
from playground.providers.model_ids import model_id_validate
from playground.providers.selectors import connection_get
from playground.storable import is_storable
from playground.usage.metered_call import MeteredCall
from playground.usage.metering import Outcome, estimate_tokens
from playground.usage.models import UsageRecord
from playground.usage.services import RequestContext

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 100_000
# Earlier messages sent with each turn: bounds the query and the request of a long conversation.
HISTORY_MAX_MESSAGES = 200
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
    try:
        model_id_validate(model_id)  # it goes into request paths
    except ValidationError as exc:
        raise ValidationError({"model_id": exc.messages}) from exc
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
    call: MeteredCall
    assistant_message: Message | None = None
    answer: AnswerCollector = field(default_factory=AnswerCollector)

    def __post_init__(self) -> None:
        self.call.after_record = self._save_answer

    async def events(self) -> AsyncGenerator[StreamEvent]:
        """The upstream's events; the metered call writes the record and then the answer."""
        async with aclosing(self.call.events()) as events:
            async for event in events:
                self.answer.observe(event)
                yield event

    def _save_answer(self, record: UsageRecord | None, outcome: Outcome) -> None:
        with transaction.atomic():
            message = Message.objects.create(
                conversation=self.conversation,
                role=MessageRole.ASSISTANT,
                content=self.answer.text,
                reasoning=self.answer.reasoning,
                usage_record=record,
            )
            Conversation.objects.filter(pk=self.conversation.pk).update(updated_at=message.created_at)
        self.assistant_message = message


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
    if not is_storable(text):  # JSON can carry "\ud800"; neither database can store it
        raise ValidationError(
            "The message contains a character that cannot be stored (a lone surrogate or NUL); "
            "nothing was sent."
        )
    conversation = _conversation_for_run(user=user, conversation_id=conversation_id)
    connection = conversation.connection
    if connection is None:
        raise ValidationError("This conversation's connection was deleted; start a new conversation.")
    affinity_key = conversation.affinity_key if conversation.use_affinity else ""
    request = ChatRequest(
        model=conversation.model_id,
        messages=[*upstream_messages(conversation), {"role": "user", "content": text}],
        affinity_key=affinity_key,
    )
    context_window = _require_fits_context(request)
    adapter = adapter_for(connection)
    with transaction.atomic():
        user_message = Message.objects.create(conversation=conversation, role=MessageRole.USER, content=text)
        if not conversation.title:
            conversation.title = text[:TITLE_CHARS]
        conversation.save(update_fields=["title", "updated_at"])
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
        call=MeteredCall(adapter=adapter, request=request, context=context, context_window=context_window),
    )


def upstream_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """The saved history in OpenAI message shape, system prompt first so the prefix stays cacheable.

    Only the last `HISTORY_MAX_MESSAGES` messages are sent. Failed answers (no text) are left
    out: sending an empty assistant turn confuses models.
    """
    messages: list[dict[str, Any]] = []
    if conversation.system_prompt.strip():
        messages.append({"role": "system", "content": conversation.system_prompt})
    recent = list(conversation.messages.order_by("-created_at", "-id")[:HISTORY_MAX_MESSAGES])
    for message in reversed(recent):
        if message.content:
            messages.append({"role": message.role, "content": message.content})
    return messages


def _require_fits_context(request: ChatRequest) -> int | None:
    """Refuse a prompt that cannot fit the model's context window, before anything is sent.

    The estimate is the meter's (about 4 characters per token); a model whose window the
    catalogue does not know is not checked. Returns the window (None when unknown).
    """
    model = catalog_model_serving(model_id=request.model, day=timezone.now().date())
    if model is None or model.context_window is None:
        return None
    estimate = estimate_tokens(request.prompt_chars)
    if estimate >= model.context_window:
        raise ValidationError(
            f"This conversation is about {estimate:,} tokens (estimated), and {model.display_name} "
            f"reads at most {model.context_window:,}: start a new conversation or send a shorter message."
        )
    return model.context_window


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
