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
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import prefetch_related_objects
from django.utils import timezone

from playground.accounts.permissions import require_run_role
from playground.catalog.selectors import catalog_model_serving
from playground.chat.attachments import (
    ImageRefused,
    attachment_discard,
    attachment_store,
    attachments_for_turn,
    attachments_link,
    attachments_pending,
    image_clean,
    image_refusal,
    read_limited,
    too_large_message,
    upload_name,
    user_content,
)
from playground.chat.composer import (
    chat_request_build,
    composer_capabilities,
    parameters_check,
    response_format_check,
    structured_check,
)
from playground.chat.models import Attachment, Conversation, Message, MessageRole
from playground.chat.selectors import attachment_get, conversation_get, message_list
from playground.chat.tools import (
    MAX_AUTO_MOCK_STEPS,
    ToolCallRecord,
    ToolsInvalid,
    tool_by_name,
    tool_call_record,
    tool_choice_parse,
    tool_result_content,
    tools_parse,
)
from playground.lib.storable import is_storable
from playground.providers.adapters import ChatAdapter, ChatRequest, adapter_for
from playground.providers.answer_collector import AnswerCollector, FunctionCallPart, ToolCallPart
from playground.providers.connection_check import connection_model_check
from playground.providers.events import StreamEvent
from playground.providers.issues import Issue
from playground.providers.request_rules import Capabilities, tools_support
from playground.providers.selectors import connection_for_run
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
    """Raises `ValidationError` keyed by form field: see `connection_for_run`, and a model id the
    connection does not serve when it lists its models (`connection_model_check`)."""
    connection, model_id = connection_for_run(user=user, connection_id=connection_id, model_id=model_id)
    connection_model_check(connection=connection, model_id=model_id)
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


def conversation_composer_update(
    *,
    user: User,
    conversation_id: int,
    parameters: dict[str, Any],
    response_format: str,
    schema_name: str = "",
    schema_strict: bool = False,
    schema_text: str = "",
) -> Conversation:
    """Save the composer's settings, all or nothing.

    Raises `ValidationError` keyed by field: a parameter the model or connection does not
    take, `json_schema` for a model the catalogue does not say can follow one, a schema
    that is not JSON or breaks the 2020-12 meta-schema (each error with its JSON path).
    """
    conversation = _conversation_for_run(user=user, conversation_id=conversation_id)
    caps = composer_capabilities(conversation=conversation, day=timezone.now().date())
    errors: dict[str, list[str]] = {}
    kept: dict[str, Any] = {}
    stored_format = None
    try:
        kept = parameters_check(caps=caps, parameters=parameters)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    try:
        stored_format = response_format_check(
            caps=caps, kind=response_format, name=schema_name, strict=schema_strict, schema_text=schema_text
        )
    except ValidationError as exc:
        errors.update(exc.message_dict)
    if errors:
        raise ValidationError(errors)
    conversation.parameters = kept
    conversation.response_format = stored_format
    conversation.save(update_fields=["parameters", "response_format", "updated_at"])
    return conversation


def conversation_capabilities(*, conversation: Conversation) -> Capabilities:
    return composer_capabilities(conversation=conversation, day=timezone.now().date())


def conversation_tools_update(
    *,
    user: User,
    conversation_id: int,
    tools_text: str,
    tool_choice: str,
    parallel_tool_calls: bool,
    auto_mock_steps: int,
) -> Conversation:
    """Save the tools editor, all or nothing: raises `ToolsInvalid` listing every problem
    with its JSON path (see `chat.tools`), and refuses tools for a model that takes none."""
    conversation = _conversation_for_run(user=user, conversation_id=conversation_id)
    problems: list[Issue] = []
    tools: list[dict[str, Any]] = []
    choice: str | dict[str, Any] = "auto"
    try:
        tools = tools_parse(tools_text)
        choice = tool_choice_parse(tool_choice, tools)
    except ToolsInvalid as exc:
        problems += exc.problems
    if not 0 <= auto_mock_steps <= MAX_AUTO_MOCK_STEPS:
        problems.append(Issue("auto_mock_steps", f"Between 0 and {MAX_AUTO_MOCK_STEPS}."))
    support = tools_support(model_id=conversation.model_id)
    if tools and not support.allowed:
        problems.insert(0, Issue("$", support.reason))
    if problems:
        raise ToolsInvalid(problems)
    conversation.tools = tools
    conversation.tool_choice = choice
    conversation.parallel_tool_calls = parallel_tool_calls
    conversation.auto_mock_steps = auto_mock_steps
    conversation.save(
        update_fields=["tools", "tool_choice", "parallel_tool_calls", "auto_mock_steps", "updated_at"]
    )
    return conversation


@dataclass
class ChatTurn:
    """One request/answer exchange. `assistant_message` is set once `events()` has ended.

    `user_message` is the message the answer replies to: the user's question, or, for a
    tool continuation, the last of `tool_results` (which answer `continues`' calls).
    """

    conversation: Conversation
    user_message: Message
    call: MeteredCall
    assistant_message: Message | None = None
    answer: AnswerCollector = field(default_factory=AnswerCollector)
    continues: Message | None = None
    tool_results: list[Message] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.call.after_record = self._save_answer

    async def events(self) -> AsyncGenerator[StreamEvent]:
        """The upstream's events; the metered call writes the record and then the answer."""
        async with aclosing(self.call.events()) as events:
            async for event in events:
                self.answer.observe(event)
                yield event

    def _tool_calls(self) -> list[ToolCallRecord]:
        return [tool_call_record(call, self.conversation.tools) for call in self.answer.tool_calls]

    def _save_answer(self, record: UsageRecord | None, outcome: Outcome) -> None:
        with transaction.atomic():
            message = Message.objects.create(
                conversation=self.conversation,
                role=MessageRole.ASSISTANT,
                content=self.answer.text,
                reasoning=self.answer.reasoning,
                tool_calls=self._tool_calls(),
                structured=structured_check(
                    text=self.answer.text, response_format=self.conversation.response_format
                ),
                usage_record=record,
            )
            Conversation.objects.filter(pk=self.conversation.pk).update(updated_at=message.created_at)
        self.assistant_message = message


def chat_turn_start(
    *, user: User, conversation_id: int, text: str, attachment_ids: Sequence[int] = ()
) -> ChatTurn:
    """Check the user may send, save their message, and build the upstream request.

    `attachment_ids`: images uploaded to this conversation and not sent yet; they go with
    the message (which may then have no text) when the model reads images.

    Blocking (ORM, decrypting the token, resolving the host): call via `sync_to_async`.
    Raises `ConversationNotFound`, `PermissionDenied` or `ValidationError`.
    """
    text = text.strip()
    if not text and not attachment_ids:
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
    attachments = _attachments_to_send(conversation, attachment_ids)
    request = chat_request_build(  # parameters, response format: the composer's settings
        conversation=conversation,
        messages=[
            *upstream_messages(conversation),
            {"role": "user", "content": user_content(text=text, attachments=attachments)},
        ],
        day=timezone.now().date(),
    )
    context_window = _require_fits_context(request)
    adapter = adapter_for(connection)
    with transaction.atomic():
        user_message = Message.objects.create(conversation=conversation, role=MessageRole.USER, content=text)
        attachments_link(message=user_message, attachments=attachments)
        if not conversation.title:
            conversation.title = text[:TITLE_CHARS] or _images_title(len(attachments))
        conversation.save(update_fields=["title", "updated_at"])
    prefetch_related_objects([user_message], "attachments")  # the page shows them from async code
    return ChatTurn(
        conversation=conversation,
        user_message=user_message,
        call=_metered_call(
            user=user, conversation=conversation, adapter=adapter, request=request, window=context_window
        ),
    )


@dataclass(frozen=True)
class ToolResultInput:
    """What the user gave for one call: typed text, or the index of one of the tool's mocks."""

    text: str = ""
    mock: int | None = None


class ToolResultsRefused(ValidationError):
    """Some calls lack a usable result; `errors` maps each call's index to why. Nothing was saved."""

    def __init__(self, errors: Mapping[int, str]) -> None:
        self.errors = dict(errors)
        super().__init__([f"Call {index + 1}: {text}" for index, text in sorted(self.errors.items())])


def chat_continue_start(
    *, user: User, conversation_id: int, message_id: int, results: Mapping[int, ToolResultInput]
) -> ChatTurn:
    """Answer every tool call of the conversation's last answer and send the next request.

    The tool messages (one per call, keyed by the answer and the call's index; the call's
    own id is only sent back) are saved and the request built in one transaction: a call
    without a usable result (parallel calls need all of theirs), a typed result that is not
    JSON for a tool that returns JSON, or a request that cannot be sent saves nothing.
    Blocking: call via `sync_to_async`. Raises `ConversationNotFound`, `PermissionDenied`,
    `ToolResultsRefused` or `ValidationError`.
    """
    conversation = _conversation_for_run(user=user, conversation_id=conversation_id)
    connection = conversation.connection
    if connection is None:
        raise ValidationError("This conversation's connection was deleted; start a new conversation.")
    # With its usage record: the page shows the answer again, now with its results.
    answer = message_list(conversation=conversation).filter(pk=message_id, role=MessageRole.ASSISTANT).first()
    if answer is None or not answer.tool_calls:
        raise ValidationError("That answer has no tool calls to continue from.")
    if answer.tool_results.exists():
        raise ValidationError("These tool calls were already answered.")
    if conversation.messages.filter(created_at__gte=answer.created_at).exclude(pk=answer.pk).exists():
        raise ValidationError("Only the latest answer's tool calls can be continued; later messages exist.")
    contents: dict[int, str] = {}
    errors: dict[int, str] = {}
    for call in answer.tool_calls:
        given = results.get(call["index"], ToolResultInput())
        try:
            contents[call["index"]] = tool_result_content(
                text=given.text, mock=given.mock, tool=tool_by_name(conversation.tools, call["name"])
            )
        except ValidationError as exc:
            errors[call["index"]] = " ".join(exc.messages)
    if errors:
        raise ToolResultsRefused(errors)
    adapter = adapter_for(connection)  # refuse an unusable connection before anything is saved
    with transaction.atomic():
        tool_results = [
            Message.objects.create(
                conversation=conversation,
                role=MessageRole.TOOL,
                content=contents[call["index"]],
                reply_to=answer,
                tool_call_index=call["index"],
                tool_call_id=call["id"],
            )
            for call in sorted(answer.tool_calls, key=lambda call: call["index"])
        ]
        request = chat_request_build(
            conversation=conversation, messages=upstream_messages(conversation), day=timezone.now().date()
        )
        context_window = _require_fits_context(request)  # raising here rolls the results back
        conversation.save(update_fields=["updated_at"])
    return ChatTurn(
        conversation=conversation,
        user_message=tool_results[-1],
        call=_metered_call(
            user=user, conversation=conversation, adapter=adapter, request=request, window=context_window
        ),
        continues=answer,
        tool_results=tool_results,
    )


def chat_auto_continue_start(*, user: User, conversation_id: int, message_id: int) -> ChatTurn | None:
    """Answer every call of `message_id` with its tool's first mock (auto-mock mode).

    None when a call's tool has no mock (the user answers then). The caller counts the
    steps against `Conversation.auto_mock_steps`.
    """
    conversation = _conversation_for_run(user=user, conversation_id=conversation_id)
    answer = conversation.messages.filter(pk=message_id, role=MessageRole.ASSISTANT).first()
    if answer is None or not answer.tool_calls:
        return None
    for call in answer.tool_calls:
        tool = tool_by_name(conversation.tools, call["name"])
        if tool is None or not tool.get("mocks"):
            return None
    results = {call["index"]: ToolResultInput(mock=0) for call in answer.tool_calls}
    return chat_continue_start(
        user=user, conversation_id=conversation_id, message_id=message_id, results=results
    )


def _metered_call(
    *,
    user: User,
    conversation: Conversation,
    adapter: ChatAdapter,
    request: ChatRequest,
    window: int | None,
) -> MeteredCall:
    context = RequestContext(
        team_id=conversation.team_id,
        user_id=user.pk,
        connection_id=conversation.connection_id,
        model_id=conversation.model_id,
        conversation_id=conversation.pk,
        affinity_key=request.affinity_key,
        streamed=request.stream,
    )
    return MeteredCall(adapter=adapter, request=request, context=context, context_window=window)


def upstream_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """The saved history in OpenAI message shape, system prompt first so the prefix stays cacheable.

    Only turns that were answered go out, and a turn whose tool round trip is pending (the
    results just saved for the request being built): a turn is a user message and the answers
    and tool results that follow it, up to an answer with text. A failed request (refused by a
    budget, an upstream error, a timeout, stopped before any output) is left out with what
    triggered it: the user message, or a continuation's tool results. So no user message goes
    out twice in a row, which templates that need alternating roles refuse. An answer with
    tool calls goes out with its `tool_calls`, followed by one `tool` message per call in
    index order (matched by the answer and the index: Kimi's ids repeat), but only when every
    call was answered; otherwise (the user typed a new message instead) it goes out as text,
    or its turn not at all. Only the last `HISTORY_MAX_MESSAGES` messages are read.
    """
    messages: list[dict[str, Any]] = []
    if conversation.system_prompt.strip():
        messages.append({"role": "system", "content": conversation.system_prompt})
    recent = list(
        conversation.messages.select_related("usage_record")
        .defer("usage_record__request_body")
        .prefetch_related("attachments")
        .order_by("-created_at", "-id")[:HISTORY_MAX_MESSAGES]
    )
    kept = _without_failed_turns(reversed(recent))
    results: dict[int, list[Message]] = {}
    for message in kept:
        if message.role == MessageRole.TOOL and message.reply_to_id is not None:
            results.setdefault(message.reply_to_id, []).append(message)
    turn: list[dict[str, Any]] = []  # the turn being read, sent once an answer with text ends it
    for message in kept:
        if message.role == MessageRole.TOOL:
            continue  # sent right after the answer whose call it answers
        if message.role == MessageRole.USER:
            turn = [_user_part(message)]  # a turn still open here was never answered: left out
            continue
        answered = sorted(results.get(message.pk, []), key=lambda result: result.tool_call_index or 0)
        calls = sorted(message.tool_calls or [], key=lambda call: call["index"])
        if calls and [call["index"] for call in calls] == [result.tool_call_index for result in answered]:
            turn.append(
                {
                    "role": "assistant",
                    "content": message.content or None,
                    "tool_calls": [_tool_call_part(call) for call in calls],
                }
            )
            turn += [
                {"role": "tool", "tool_call_id": result.tool_call_id, "content": result.content}
                for result in answered
            ]
        elif message.content:
            messages += [*turn, {"role": "assistant", "content": message.content}]
            turn = []
    if turn and turn[-1]["role"] == "tool":  # the round trip this request continues
        messages += turn
    return messages


def _without_failed_turns(messages: Iterable[Message]) -> list[Message]:
    """`messages` (oldest first) without failed answers and the messages that triggered them."""
    kept: list[Message] = []
    trigger: list[Message] = []  # what the next answer replies to: a user message or tool results
    for message in messages:
        if message.role != MessageRole.ASSISTANT:
            trigger.append(message)
            continue
        if not message.is_failed_answer:
            kept += [*trigger, message]
        trigger = []
    return kept + trigger


def _user_part(message: Message) -> dict[str, Any]:
    """A user message; with its images as OpenAI content parts carrying data URLs (the text may
    be empty)."""
    if images := list(message.attachments.all()):
        return {"role": "user", "content": user_content(text=message.content, attachments=images)}
    return {"role": "user", "content": message.content}


def chat_turn_delete(*, user: User, conversation_id: int, message_id: int) -> list[int]:
    """Delete a failed turn: the failed answer `message_id` and what triggered it (the user's
    message, or a continuation's tool results, whose calls may then be answered again). Its
    usage record stays in the log. Returns the deleted messages' ids.

    Raises `ConversationNotFound` (another team's conversation, or no such answer in it: 404),
    `PermissionDenied` (viewers) or `ValidationError` (an answered turn stays).
    """
    conversation = _conversation_for_run(user=user, conversation_id=conversation_id)
    with transaction.atomic():
        answer = (
            conversation.messages.select_related("usage_record")
            .filter(pk=message_id, role=MessageRole.ASSISTANT)
            .first()
        )
        if answer is None:
            raise ConversationNotFound(message_id)
        if not answer.is_failed_answer:
            raise ValidationError("Only a refused or failed turn can be deleted; answered turns stay.")
        doomed = [answer.pk]
        newest_first = conversation.messages.filter(created_at__lte=answer.created_at).order_by(
            "-created_at", "-id"
        )
        reached = False  # past the answer (messages saved in its instant after it come first)
        for pk, role in newest_first.values_list("pk", "role").iterator():
            if not reached:
                reached = pk == answer.pk
            elif role == MessageRole.ASSISTANT:
                break  # the previous answer: the turn starts after it
            else:
                doomed.append(pk)
        for attachment in Attachment.objects.filter(message_id__in=doomed):
            attachment_discard(attachment)
        Message.objects.filter(pk__in=doomed).delete()
    return doomed


def _tool_call_part(call: ToolCallRecord) -> ToolCallPart:
    """A stored call as the `tool_calls[]` item of an assistant message, with its original id."""
    function: FunctionCallPart = {"name": call["name"], "arguments": call["arguments"]}
    return {"id": call["id"], "type": "function", "function": function}


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
    require_run_role(user=user, team_id=conversation.team_id)
    return conversation


# --- image attachments ----------------------------------------------------------------------


@dataclass(frozen=True)
class UploadResult:
    accepted: list[Attachment]
    refused: list[tuple[str, str]]  # (file name, why)


def attachment_upload(
    *, user: User, conversation_id: int, uploads: Sequence[Any], too_large: Sequence[str] = ()
) -> UploadResult:
    """Check, re-encode and store images for the conversation's next message.

    Each file is judged on its own: the good ones are kept, each refused one is named with
    the reason (`too_large`: names the upload handler already stopped reading). Nothing is
    stored for a model that does not read images, or beyond `ATTACHMENTS_PER_TURN` waiting.
    Raises `ConversationNotFound` or `PermissionDenied`.
    """
    conversation = _conversation_for_run(user=user, conversation_id=conversation_id)
    limit_bytes = settings.ATTACHMENT_MAX_BYTES
    refused = [(upload_name(name), too_large_message(limit_bytes)) for name in too_large]
    refusal = image_refusal(model_id=conversation.model_id)
    if refusal:
        return UploadResult([], refused + [(upload_name(upload.name), refusal) for upload in uploads])
    room = settings.ATTACHMENTS_PER_TURN - len(attachments_pending(conversation=conversation))
    accepted: list[Attachment] = []
    for upload in uploads:
        name = upload_name(upload.name)
        if len(accepted) >= room:
            refused.append((name, f"A message can carry at most {settings.ATTACHMENTS_PER_TURN} images."))
            continue
        try:
            image = image_clean(read_limited(upload, limit=limit_bytes))
        except ImageRefused as exc:
            refused.append((name, " ".join(exc.messages)))
            continue
        accepted.append(attachment_store(conversation=conversation, image=image))
    return UploadResult(accepted, refused)


def attachment_remove(*, user: User, attachment_id: int) -> None:
    """Delete an image that was uploaded but not sent. Raises `ConversationNotFound` (404)
    for another team's image, `ValidationError` for one already sent."""
    attachment = attachment_get(user=user, attachment_id=attachment_id)
    if attachment is None:
        raise ConversationNotFound(attachment_id)
    require_run_role(user=user, team_id=attachment.conversation.team_id)
    if attachment.message_id is not None:
        raise ValidationError("This image was sent with a message; it stays with it.")
    attachment_discard(attachment)


def _attachments_to_send(conversation: Conversation, ids: Sequence[int]) -> list[Attachment]:
    if not ids:
        return []
    refusal = image_refusal(model_id=conversation.model_id)
    if refusal:
        raise ValidationError(f"{refusal} Nothing was sent.")
    return attachments_for_turn(conversation=conversation, ids=ids)


def _images_title(count: int) -> str:
    return "1 image" if count == 1 else f"{count} images"
