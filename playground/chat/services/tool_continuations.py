"""Tool continuations: an answer's tool calls answered (typed results or mocks) and the next request sent.

Auto-mock mode is a rule of this service, not of the socket: after a turn, up to
`Conversation.auto_mock_steps` continuations in a row are answered from the tools' first
mocks (`chat_auto_continue`); the consumer only streams the turns it is handed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from playground.chat.domain.composer import chat_request_build
from playground.chat.domain.tools import tool_by_name, tool_result_content
from playground.chat.models import Message, MessageRole
from playground.chat.selectors import message_list
from playground.chat.services.conversations import conversation_for_run
from playground.chat.services.history import upstream_messages
from playground.chat.services.turns import ChatTurn, require_fits_context, turn_metered_call
from playground.providers.adapters import adapter_for


@dataclass(frozen=True)
class ToolResultInput:
    """What the user gave for one call: typed text, or the index of one of the tool's mocks."""

    text: str = ""
    mock: int | None = None


class ToolResultsRefused(ValidationError):
    """Some calls of the answer `message_id` lack a usable result; `errors` maps each call's
    index to why. Nothing was saved."""

    def __init__(self, errors: Mapping[int, str], *, message_id: int) -> None:
        self.errors = dict(errors)
        self.message_id = message_id
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
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    connection = conversation.connection
    if connection is None:
        raise ValidationError("This conversation's connection was deleted; start a new conversation.")
    # With its usage record: the page shows the answer again, now with its results.
    answer = message_list(conversation=conversation).filter(pk=message_id, role=MessageRole.ASSISTANT).first()
    if answer is None or not answer.tool_calls:
        raise ValidationError("That answer has no tool calls to continue from.")
    if answer.tool_results.exists():
        raise ValidationError("These tool calls were already answered.")
    if answer.children.exists():
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
        raise ToolResultsRefused(errors, message_id=message_id)
    adapter = adapter_for(connection)  # refuse an unusable connection before anything is saved
    with transaction.atomic():
        tool_results: list[Message] = []
        for call in sorted(answer.tool_calls, key=lambda call: call["index"]):
            tool_results.append(  # each after the one before, on the answer's branch
                Message.objects.create(
                    conversation=conversation,
                    parent=tool_results[-1] if tool_results else answer,
                    role=MessageRole.TOOL,
                    content=contents[call["index"]],
                    reply_to=answer,
                    tool_call_index=call["index"],
                    tool_call_id=call["id"],
                )
            )
        request = chat_request_build(
            conversation=conversation,
            messages=upstream_messages(conversation, through=tool_results[-1].pk),
            day=timezone.now().date(),
        )
        context_window = require_fits_context(request, connection)  # raising here rolls the results back
        conversation.current_leaf = tool_results[-1]
        conversation.save(update_fields=["current_leaf", "updated_at"])
    return ChatTurn(
        conversation=conversation,
        user_message=tool_results[-1],
        call=turn_metered_call(
            user=user, conversation=conversation, adapter=adapter, request=request, window=context_window
        ),
        continues=answer,
        tool_results=tool_results,
    )


async def chat_auto_continue(*, user: User, turn: ChatTurn) -> ChatTurn | None:
    """Auto-mock mode: the turn after the finished `turn`, its calls answered with their tools'
    first mocks; None when the user answers instead.

    None when `turn`'s answer was not stored or has no tool calls, when its conversation's
    `auto_mock_steps` are used up (`turn.mock_steps` counts them since the user last acted;
    0 turns the mode off), or when a call's tool has no mock. The first three are read from
    `turn` with no query and no thread, so a turn that ends there frees its socket at once.
    Raises as `chat_continue_start`.
    """
    answer = turn.assistant_message
    if answer is None or not answer.tool_calls or turn.mock_steps >= turn.conversation.auto_mock_steps:
        return None
    next_turn: ChatTurn | None = await database_sync_to_async(_mocks_continue_start)(
        user=user, turn=turn, answer=answer
    )
    return next_turn


def _mocks_continue_start(*, user: User, turn: ChatTurn, answer: Message) -> ChatTurn | None:
    conversation = conversation_for_run(user=user, conversation_id=turn.conversation.pk)
    for call in answer.tool_calls:
        tool = tool_by_name(conversation.tools, call["name"])
        if tool is None or not tool.get("mocks"):
            return None
    results = {call["index"]: ToolResultInput(mock=0) for call in answer.tool_calls}
    next_turn = chat_continue_start(
        user=user, conversation_id=conversation.pk, message_id=answer.pk, results=results
    )
    next_turn.mock_steps = turn.mock_steps + 1
    return next_turn
