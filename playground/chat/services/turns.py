"""One chat turn: check and save the user's message, build the request, and run it through the metered call.

A turn is `chat_turn_start` (sync: checks, saves the user's message, builds the request)
then `ChatTurn.events()` (async: streams normalized events) through the one metered call
(`playground.usage.calls.call`). However the stream ends (answer, upstream error,
timeout, Stop, a client that went away, or data nobody could read), the metered call
writes the usage record and then the assistant message, as one step shielded from
cancellation, and neither write can skip the other. A tool continuation is a turn too
(`tool_continuations`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import prefetch_related_objects
from django.db.models.functions import Coalesce
from django.utils import timezone

from playground.chat.domain.attachments import (
    attachment_copy,
    attachments_for_turn,
    attachments_link,
    image_refusal,
    user_content,
)
from playground.chat.domain.branches import MessageTree, branch_leaf_id
from playground.chat.domain.composer import chat_request_build
from playground.chat.domain.tools import ToolCallRecord, tool_call_record
from playground.chat.models import Attachment, Conversation, Message, MessageRole
from playground.chat.services.conversations import MessageNotFound, conversation_for_run
from playground.chat.services.history import CURRENT_LEAF, upstream_messages
from playground.lib.storable import is_storable
from playground.providers.adapters import ChatAdapter, ChatRequest, adapter_for
from playground.providers.answer_collector import AnswerCollector
from playground.providers.context_windows import context_window_for
from playground.providers.events import StreamEvent
from playground.providers.models import ProviderConnection
from playground.providers.structured_answers import structured_check
from playground.usage.budgets.worst_case import request_max_tokens_asked
from playground.usage.calls.call import MeteredCall
from playground.usage.calls.kinds import chat_turn_call
from playground.usage.calls.settlement import Alone
from playground.usage.metering import Outcome
from playground.usage.models import UsageRecord
from playground.usage.token_count import prompt_tokens_count, window_overrun

MAX_MESSAGE_CHARS = 100_000
TITLE_CHARS = 80


@dataclass
class ChatTurn:
    """One request/answer exchange. `assistant_message` is set once `events()` has ended.

    `user_message` is the message the answer replies to: the user's question, or, for a
    tool continuation, the last of `tool_results` (which answer `continues`' calls).
    `mock_steps`: the continuations answered from mocks since the user last acted, this
    one included (auto-mock mode counts them against `Conversation.auto_mock_steps`).
    `question_siblings`: the question's branch alternatives (itself included), and
    `answer_siblings` the answer's, once it is saved (the page's "< 2 / 3 >"); `replaced`:
    the messages on screen that this turn's new branch takes the place of.
    """

    conversation: Conversation
    user_message: Message
    call: MeteredCall
    assistant_message: Message | None = None
    answer: AnswerCollector = field(default_factory=AnswerCollector)
    continues: Message | None = None
    tool_results: list[Message] = field(default_factory=list)
    mock_steps: int = 0
    model_label: str = ""  # the model to name on the answer: the conversation's changed since the last one
    question_siblings: list[int] = field(default_factory=list)
    answer_siblings: list[int] = field(default_factory=list)
    replaced: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.call.settlement = Alone(self._save_answer)

    async def events(self) -> AsyncGenerator[StreamEvent]:
        """The upstream's events; the metered call writes the record and then the answer."""
        async with aclosing(self.call.events()) as events:
            async for event in events:
                self.answer.observe(event)
                yield event

    def _tool_calls(self) -> list[ToolCallRecord]:
        return [tool_call_record(call, self.conversation.tools) for call in self.answer.tool_calls]

    def _save_answer(self, record: UsageRecord | None, outcome: Outcome) -> None:
        parent = self.user_message
        with transaction.atomic():
            if not Message.objects.filter(pk=parent.pk).exists():
                return  # its turn was deleted while it streamed: the record stays in the log
            message = Message.objects.create(
                conversation=self.conversation,
                parent=parent,
                role=MessageRole.ASSISTANT,
                content=self.answer.text,
                reasoning=self.answer.reasoning,
                tool_calls=self._tool_calls(),
                structured=structured_check(
                    text=self.answer.text, response_format=self.conversation.response_format
                ),
                usage_record=record,
            )
            conversations = Conversation.objects.filter(pk=self.conversation.pk)
            conversations.update(updated_at=message.created_at)
            # The branch moves on to the answer unless the user switched to another meanwhile.
            conversations.filter(current_leaf=parent).update(current_leaf=message)
            self.answer_siblings = list(
                Message.objects.filter(parent=parent).order_by("id").values_list("id", flat=True)
            )
        self.assistant_message = message


def chat_turn_start(
    *,
    user: User,
    conversation_id: int,
    text: str,
    attachment_ids: Sequence[int] = (),
    after: int | None = None,
) -> ChatTurn:
    """Check the user may send, save their message at the end of the branch on screen, and
    build the upstream request.

    `attachment_ids`: images uploaded to this conversation and not sent yet; they go with
    the message (which may then have no text) when the model reads images. `after`: the last
    message the page shows (None: the conversation's current leaf). A page that shows another
    branch than the one last continued (another tab moved on) sends its own: a message after
    one that already has a continuation starts a new branch there.

    Blocking (ORM, decrypting the token, resolving the host): call via `sync_to_async`.
    Raises `ConversationNotFound`, `MessageNotFound`, `PermissionDenied` or `ValidationError`.
    """
    text = message_text_check(text, images=bool(attachment_ids))
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    attachments = attachments_to_send(conversation, attachment_ids)
    tree = MessageTree.load(conversation)
    return question_turn_start(
        user=user,
        conversation=conversation,
        parent_id=branch_end(conversation, after, tree),
        text=text,
        attachments=attachments,
        tree=tree,
    )


def branch_end(conversation: Conversation, after: int | None, tree: MessageTree) -> int | None:
    """The message a new question follows: `after` (refused unless it is this conversation's),
    or the current leaf."""
    if after is None:
        return branch_leaf_id(conversation, tree)
    if after not in tree.parents:
        raise MessageNotFound(after)
    return after


def message_text_check(text: str, *, images: bool = False) -> str:
    """The user's text, stripped; refused when empty (without images), too long or unstorable."""
    text = text.strip()
    if not text and not images:
        raise ValidationError("Type a message first.")
    if len(text) > MAX_MESSAGE_CHARS:
        raise ValidationError(f"A message can be at most {MAX_MESSAGE_CHARS:,} characters.")
    if not is_storable(text):  # JSON can carry "\ud800"; neither database can store it
        raise ValidationError(
            "The message contains a character that cannot be stored (a lone surrogate or NUL); "
            "nothing was sent."
        )
    return text


def question_turn_start(
    *,
    user: User,
    conversation: Conversation,
    parent_id: int | None,
    text: str,
    attachments: Sequence[Attachment] = (),
    copy_images_of: Message | None = None,
    tree: MessageTree | None = None,
) -> ChatTurn:
    """Save a question after the message `parent_id` (None: as a first message) and build its
    request, whose history is the branch ending at `parent_id`. The question becomes the
    branch's leaf. `copy_images_of`: an edited question keeps the original's images (copies).
    `tree`: the conversation's messages as the caller just loaded them (two queries less).
    """
    connection = conversation.connection
    if connection is None:
        raise ValidationError("This conversation's connection was deleted; start a new conversation.")
    originals = list(copy_images_of.attachments.all()) if copy_images_of is not None else []
    request = turn_request_build(
        conversation=conversation,
        text=text,
        attachments=[*attachments, *originals],
        after=parent_id,
        tree=tree,
    )
    context_window = require_fits_context(request, connection)
    adapter = adapter_for(connection)
    with transaction.atomic():
        user_message = Message.objects.create(
            conversation=conversation, role=MessageRole.USER, content=text, parent_id=parent_id
        )
        attachments_link(message=user_message, attachments=attachments)
        for original in originals:
            attachment_copy(original, message=user_message)
        if not conversation.title:
            conversation.title = text[:TITLE_CHARS] or _images_title(len(attachments) + len(originals))
        conversation.current_leaf = user_message
        conversation.save(update_fields=["title", "current_leaf", "updated_at"])
    prefetch_related_objects([user_message], "attachments")  # the page shows them from async code
    return ChatTurn(
        conversation=conversation,
        user_message=user_message,
        call=turn_metered_call(
            user=user, conversation=conversation, adapter=adapter, request=request, window=context_window
        ),
        model_label=_model_label(conversation),
        question_siblings=(
            [*tree.children.get(parent_id, []), user_message.pk]
            if tree is not None
            else list(
                conversation.messages.filter(parent_id=parent_id).order_by("id").values_list("id", flat=True)
            )
        ),
    )


def turn_request_build(
    *,
    conversation: Conversation,
    text: str,
    attachments: Sequence[Attachment] = (),
    image_bytes: bool = True,
    after: int | None = CURRENT_LEAF,
    tree: MessageTree | None = None,
) -> ChatRequest:
    """The request a turn sends for the user's `text` and images: the history (the branch
    ending at the message `after`, by default the one on screen), then the new message, with
    the composer's settings (parameters, response format, tools, affinity).

    Also what "View code" and the pre-flight cost show for the next turn, so they describe the
    very request Send would make. `image_bytes=False`: images without their data, for the
    pre-flight's estimate (reading megabytes of images at each keystroke would be its whole cost).
    Raises `ValidationError` like `chat_request_build`.
    """
    return chat_request_build(
        conversation=conversation,
        messages=[
            *upstream_messages(conversation, through=after, image_bytes=image_bytes, tree=tree),
            {
                "role": "user",
                "content": user_content(text=text, attachments=attachments, image_bytes=image_bytes),
            },
        ],
        day=timezone.now().date(),
    )


def _model_label(conversation: Conversation) -> str:
    """The conversation's model if the last answer was written by another (as the page names it;
    a fork's copied answers by the model of their original's record)."""
    previous = (
        conversation.messages.filter(role=MessageRole.ASSISTANT)
        .exclude(usage_record__isnull=True, copied_record__isnull=True)
        .order_by("-created_at", "-id")
        .values_list(Coalesce("usage_record__model_id", "copied_record__model_id"), flat=True)
        .first()
    )
    return conversation.model_id if previous is not None and previous != conversation.model_id else ""


def turn_metered_call(
    *,
    user: User,
    conversation: Conversation,
    adapter: ChatAdapter,
    request: ChatRequest,
    window: int | None,
) -> MeteredCall:
    """The metered call of a turn's request, its usage record caused by the conversation."""
    return chat_turn_call(
        adapter=adapter,
        request=request,
        context_window=window,
        team_id=conversation.team_id,
        user_id=user.pk,
        connection_id=conversation.connection_id,
        model_id=conversation.model_id,
        conversation_id=conversation.pk,
        preset_version_id=conversation.preset_version_id,
    )


def require_fits_context(request: ChatRequest, connection: ProviderConnection) -> int | None:
    """Refuse a request that cannot fit the model's context window on `connection`, before
    anything is sent: its prompt (counted by the model's tokenizer where one is known, else
    estimated) and the `max_tokens` it asks for (`usage.token_count.window_overrun`). A model
    whose window is unknown is not checked. Returns the window (None when unknown)."""
    window = context_window_for(connection=connection, model_id=request.model, day=timezone.now().date())
    max_tokens = request_max_tokens_asked(request)
    overrun = window_overrun(
        prompt=prompt_tokens_count(connection=connection, request=request),
        max_tokens=max_tokens,
        window=window,
    )
    if overrun:
        lower = ", lower max tokens" if max_tokens else ""
        raise ValidationError(
            f"Not sent: {overrun}. Send a shorter message{lower} or start a new conversation."
        )
    return window.tokens if window is not None else None


def attachments_to_send(conversation: Conversation, ids: Sequence[int]) -> list[Attachment]:
    """The images uploaded for the next message (`ids`), refused for a model that reads none."""
    if not ids:
        return []
    refusal = image_refusal(model_id=conversation.model_id)
    if refusal:
        raise ValidationError(f"{refusal} Nothing was sent.")
    return attachments_for_turn(conversation=conversation, ids=ids)


def _images_title(count: int) -> str:
    return "1 image" if count == 1 else f"{count} images"
