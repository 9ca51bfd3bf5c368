"""The history a request sends: one branch in OpenAI shape, failed turns and unanswered calls left out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from playground.chat.domain.attachments import user_content
from playground.chat.domain.branches import MessageTree, branch_leaf_id
from playground.chat.domain.tools import ToolCallRecord
from playground.chat.models import Conversation, Message, MessageRole
from playground.providers.answer_collector import FunctionCallPart, ToolCallPart

# Earlier messages sent with each turn: bounds the query and the request of a long conversation.
HISTORY_MAX_MESSAGES = 200
# `through`'s default: the branch on screen, up to the conversation's current leaf.
CURRENT_LEAF = -1


def upstream_messages(
    conversation: Conversation,
    *,
    through: int | None = CURRENT_LEAF,
    answering: bool = False,
    image_bytes: bool = True,
    tree: MessageTree | None = None,
    limit: int | None = HISTORY_MAX_MESSAGES,
) -> list[dict[str, Any]]:
    """The saved history in OpenAI message shape, system prompt first so the prefix stays cacheable.

    The messages are those of one branch: the path from a first message down to `through` (a
    message id; None: no message, as for an edited first question; by default the current
    leaf). `answering`: the request answers `through` itself (a question answered again), so
    its turn goes out although no answer closes it.

    Only turns that were answered go out, and a turn whose tool round trip is pending (the
    results just saved for the request being built): a turn is a user message and the answers
    and tool results that follow it, up to an answer with text. A failed request (refused by a
    budget, an upstream error, a timeout, stopped before any output) is left out with what
    triggered it: the user message, or a continuation's tool results. So no user message goes
    out twice in a row, which templates that need alternating roles refuse. An answer with
    tool calls goes out with its `tool_calls`, followed by one `tool` message per call in
    index order (matched by the answer and the index: Kimi's ids repeat), but only when every
    call was answered; otherwise (the user typed a new message instead) it goes out as text,
    or its turn not at all. A user message written into the history by hand (`Message.written`)
    goes out even unanswered. Only the last `limit` messages are read (None: the whole branch,
    as an export writes it).
    `image_bytes=False`: images without their data, for estimates (`attachments.user_content`).
    `tree`: the conversation's `MessageTree` when the caller has just loaded it (one query less).
    """
    messages: list[dict[str, Any]] = []
    if conversation.system_prompt.strip():
        messages.append({"role": "system", "content": conversation.system_prompt})
    kept = without_failed_turns(branch_messages(conversation, through=through, limit=limit, tree=tree))
    results: dict[int, list[Message]] = {}
    for message in kept:
        if message.role == MessageRole.TOOL and message.reply_to_id is not None:
            results.setdefault(message.reply_to_id, []).append(message)
    turn: list[dict[str, Any]] = []  # the turn being read, sent once an answer with text ends it
    turn_written = False  # its user message was written into the history by hand: always sent
    for message in kept:
        if message.role == MessageRole.TOOL:
            continue  # sent right after the answer whose call it answers
        if message.role == MessageRole.USER:
            if turn_written:  # the user put it there, unanswered: it goes out as they wrote it
                messages += turn
            # Any other turn still open here was never answered: left out.
            turn, turn_written = [_user_part(message, image_bytes=image_bytes)], message.written
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
            turn, turn_written = [], False
    # What this request answers or continues, or a message the user wrote in.
    if turn and (answering or turn_written or turn[-1]["role"] == "tool"):
        messages += turn
    return messages


def branch_messages(
    conversation: Conversation,
    *,
    through: int | None = CURRENT_LEAF,
    limit: int | None = HISTORY_MAX_MESSAGES,
    tree: MessageTree | None = None,
) -> list[Message]:
    """The last `limit` messages (None: all) of the branch ending at `through`, oldest first."""
    if tree is None:
        tree = MessageTree.load(conversation)
    leaf = branch_leaf_id(conversation, tree) if through == CURRENT_LEAF else through
    path = tree.path(leaf)
    ids = path[-limit:] if limit is not None else path
    if not ids:
        return []
    rows = (
        conversation.messages.filter(pk__in=ids)
        .select_related("usage_record")
        .defer("usage_record__request_body")
        .prefetch_related("attachments")
        .in_bulk()
    )
    return [rows[pk] for pk in ids]


def without_failed_turns(messages: Iterable[Message]) -> list[Message]:
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


def _user_part(message: Message, *, image_bytes: bool) -> dict[str, Any]:
    """A user message; with its images as OpenAI content parts carrying data URLs (the text may
    be empty)."""
    if images := list(message.attachments.all()):
        return {
            "role": "user",
            "content": user_content(text=message.content, attachments=images, image_bytes=image_bytes),
        }
    return {"role": "user", "content": message.content}


def _tool_call_part(call: ToolCallRecord) -> ToolCallPart:
    """A stored call as the `tool_calls[]` item of an assistant message, with its original id."""
    function: FunctionCallPart = {"name": call["name"], "arguments": call["arguments"]}
    return {"id": call["id"], "type": "function", "function": function}
