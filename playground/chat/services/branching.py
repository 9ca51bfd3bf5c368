"""Branches: a question edited and sent again, an answer regenerated, a message written by hand
(an example answer, a message inserted anywhere), another branch shown, a turn deleted, a
conversation forked from a message.

Every message keeps the one before it on its branch (`Message.parent`); an edited question is
a sibling of the original, a regenerated answer a sibling of the one it replaces, and the
conversation keeps both (`chat.domain.branches`). The branch on screen ends at
`Conversation.current_leaf`: it is what the page shows and what the next request sends.
Usage records are never deleted here: a deleted answer's record stays in the log, pointing at
the conversation it cost.
"""

from __future__ import annotations

import uuid

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from playground.chat.domain.attachments import attachment_copy, attachment_discard
from playground.chat.domain.branches import MessageTree, branch_leaf_id
from playground.chat.domain.composer import chat_request_build
from playground.chat.models import Attachment, Conversation, Message, MessageRole
from playground.chat.services.conversations import MessageNotFound, conversation_for_run
from playground.chat.services.history import branch_messages, upstream_messages, without_failed_turns
from playground.chat.services.turns import (
    ChatTurn,
    message_text_check,
    question_turn_start,
    require_fits_context,
    turn_metered_call,
)
from playground.providers.adapters import adapter_for


def chat_edit_start(*, user: User, conversation_id: int, message_id: int, text: str) -> ChatTurn:
    """Send an edited copy of the question `message_id` as a new branch: a sibling of the
    original (which stays, with its answers), its history the branch before it. The original's
    images go with it. Blocking: call via `sync_to_async`.

    Raises `MessageNotFound`, `ConversationNotFound`, `PermissionDenied` or `ValidationError`.
    """
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    original = _message(conversation, message_id)
    if original.role != MessageRole.USER:
        raise ValidationError("Only your own messages can be edited.")
    text = message_text_check(text, images=original.attachments.exists())
    replaced = _shown_from(conversation, original)
    turn = question_turn_start(
        user=user, conversation=conversation, parent_id=original.parent_id, text=text, copy_images_of=original
    )
    turn.replaced = replaced
    return turn


def chat_regenerate_start(*, user: User, conversation_id: int, message_id: int) -> ChatTurn:
    """Answer again what the last answer on screen (`message_id`) replied to: the question, or
    a tool round trip. The new answer is the old one's sibling; both stay. A question left
    unanswered at the end of the branch (a fork, an answer that was never stored) can be
    answered the same way, by its own id. Blocking: call via `sync_to_async`.

    Raises `MessageNotFound`, `ConversationNotFound`, `PermissionDenied` or `ValidationError`.
    """
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    connection = conversation.connection
    if connection is None:
        raise ValidationError("This conversation's connection was deleted; start a new conversation.")
    message = _message(conversation, message_id)
    tree = MessageTree.load(conversation)
    if tree.path(branch_leaf_id(conversation, tree))[-1:] != [message.pk]:
        raise ValidationError("Only the last answer of the branch on screen can be regenerated.")
    replaced = [message.pk] if message.role == MessageRole.ASSISTANT else []
    question = message.parent if replaced else message
    if question is None or question.role == MessageRole.ASSISTANT:
        raise ValidationError("There is no question to answer there.")
    request = chat_request_build(
        conversation=conversation,
        messages=upstream_messages(conversation, through=question.pk, answering=True),
        day=timezone.now().date(),
    )
    context_window = require_fits_context(request, connection)
    adapter = adapter_for(connection)
    conversation.current_leaf = question
    conversation.save(update_fields=["current_leaf", "updated_at"])
    return ChatTurn(
        conversation=conversation,
        user_message=question,
        call=turn_metered_call(
            user=user, conversation=conversation, adapter=adapter, request=request, window=context_window
        ),
        replaced=replaced,
    )


WRITABLE_ROLES = (MessageRole.USER, MessageRole.ASSISTANT)


def chat_message_write(
    *,
    user: User,
    conversation_id: int,
    role: str,
    text: str,
    replacing_id: int | None = None,
    after_id: int | None = None,
) -> Message:
    """A message written by hand, as a new branch that the page then shows; nothing is sent.

    `replacing_id`: an edited copy of that message (its sibling, as an edited question is): an
    answer rewritten as the example the model should follow. Else `after_id`: inserted after
    that message (its child; what followed it stays on the old branch); neither: before the
    first message. The next Send continues from it.

    Raises `MessageNotFound`, `ConversationNotFound`, `PermissionDenied` or `ValidationError`
    (an empty text, a role other than user or assistant, a place that would split a tool call
    from its results).
    """
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    if role not in WRITABLE_ROLES:
        raise ValidationError("A written message is a user message or an assistant message.")
    text = message_text_check(text, images=False)
    with transaction.atomic():
        if replacing_id is not None:
            original = _message(conversation, replacing_id)
            if original.role != role:
                raise ValidationError(
                    f"An edited copy of a {original.role} message is a {original.role} message."
                )
            parent_id = original.parent_id
        elif after_id is not None:
            parent_id = _message(conversation, after_id).pk
        else:
            parent_id = None
        if parent_id is not None and Message.objects.filter(pk=parent_id).exclude(tool_calls=[]).exists():
            raise ValidationError(
                "Its tool calls wait for their results: answer them before adding a message."
            )
        message = Message.objects.create(
            conversation=conversation, parent_id=parent_id, role=role, content=text, written=True
        )
        Conversation.objects.filter(pk=conversation.pk).update(
            current_leaf=message, updated_at=timezone.now()
        )
    return message


def chat_branch_switch(*, user: User, conversation_id: int, message_id: int) -> Conversation:
    """Show the branch through `message_id` (a fork's other side) down to where the user left it:
    the leaf under it they were on last (`MessageTree.last_visited_leaf`).

    Raises `MessageNotFound` or `ConversationNotFound` (both 404) or `PermissionDenied`.
    """
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    _message(conversation, message_id)
    _leaf_show(conversation, MessageTree.load(conversation).last_visited_leaf(message_id))
    return conversation


def chat_turn_delete(*, user: User, conversation_id: int, message_id: int) -> list[int]:
    """Delete a turn; returns the deleted messages' ids. Usage records stay in the log.

    By a question's id: the question, every answer to it (regenerated ones too) and their tool
    round trips. By a written answer's id: that answer alone. By a refused or failed answer's
    id: the answer and what triggered it (its
    question, unless the question has other answers; or a continuation's tool results, whose
    calls may then be answered again). Later questions on any branch under what is deleted
    move up to the message before it, so no later turn is lost. The branch on screen stays,
    or, if it was deleted, the nearest one left is shown.

    Raises `MessageNotFound` (another team's conversation, or no such message in it: 404),
    `PermissionDenied` (viewers) or `ValidationError` (an answered answer: delete its question).
    """
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    with transaction.atomic():
        message = _message(conversation, message_id)
        tree = MessageTree.load(conversation)
        roles = dict(conversation.messages.values_list("pk", "role"))
        if message.role == MessageRole.ASSISTANT:
            if not (message.is_failed_answer or message.written):
                raise ValidationError(
                    "Only a failed or written answer is deleted alone: delete its question."
                )
            # A written answer goes alone; a failed one with what triggered it.
            top = message.pk if message.written else _trigger_top(tree, roles, message.pk)
        elif message.role == MessageRole.USER:
            top = message.pk
        else:
            raise ValidationError("A tool result goes with its turn: delete the question.")
        above = tree.parents[top]
        doomed, kept = _turn_below(tree, roles, top)
        Message.objects.filter(pk__in=kept).update(parent_id=above)
        for attachment in Attachment.objects.filter(message_id__in=doomed):
            attachment_discard(attachment)
        Message.objects.filter(pk__in=doomed).delete()
        leaf = branch_leaf_id(conversation, tree)
        if leaf is None or leaf in doomed:
            leaf = MessageTree.load(conversation).last_visited_leaf(above)
        _leaf_show(conversation, leaf)
    return doomed


def chat_fork(*, user: User, conversation_id: int, message_id: int) -> Conversation:
    """A new conversation with this one's setup (connection, model, system prompt, tools and
    their mocks, response format, parameters, affinity on or off; its own affinity key) and
    the branch up to and including `message_id`, as one branch. Failed turns are left out.
    A copied answer shows its original's usage record (`Message.copied_record`: the model that
    answered, the usage line) without owning it: the record stays with the conversation it cost,
    whose totals (and the team's) count it once.

    Raises `MessageNotFound`, `ConversationNotFound` or `PermissionDenied`.
    """
    source = conversation_for_run(user=user, conversation_id=conversation_id)
    _message(source, message_id)
    path = without_failed_turns(branch_messages(source, through=message_id, limit=None))
    with transaction.atomic():
        fork = Conversation.objects.create(
            team_id=source.team_id,
            user=user,
            connection_id=source.connection_id,
            model_id=source.model_id,
            title=f"{source.title or 'Conversation'} (fork)"[:200],
            system_prompt=source.system_prompt,
            use_affinity=source.use_affinity,
            affinity_key=f"pg-{uuid.uuid4().hex}",
            parameters=source.parameters,
            tools=source.tools,
            tool_choice=source.tool_choice,
            parallel_tool_calls=source.parallel_tool_calls,
            auto_mock_steps=source.auto_mock_steps,
            response_format=source.response_format,
        )
        copies: dict[int, Message] = {}
        parent: Message | None = None
        for message in path:
            reply_to = copies.get(message.reply_to_id) if message.reply_to_id is not None else None
            parent = Message.objects.create(
                conversation=fork,
                parent=parent,
                role=message.role,
                content=message.content,
                reasoning=message.reasoning,
                tool_calls=message.tool_calls,
                reply_to=reply_to,
                tool_call_index=message.tool_call_index,
                tool_call_id=message.tool_call_id,
                structured=message.structured,
                written=message.written,
                copied_record_id=message.usage_record_id or message.copied_record_id,
            )
            copies[message.pk] = parent
            for attachment in message.attachments.all():
                attachment_copy(attachment, message=parent)
        fork.current_leaf = parent
        fork.save(update_fields=["current_leaf"])
    return fork


def _leaf_show(conversation: Conversation, leaf_id: int | None) -> None:
    """End the branch on screen at `leaf_id`, remembered as visited now: a switch away and back
    returns to it."""
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf_id=leaf_id)
    if leaf_id is not None:
        Message.objects.filter(pk=leaf_id).update(visited_at=timezone.now())
    conversation.current_leaf_id = leaf_id


def _message(conversation: Conversation, message_id: int) -> Message:
    message = conversation.messages.select_related("usage_record", "parent").filter(pk=message_id).first()
    if message is None:
        raise MessageNotFound(message_id)
    return message


def _shown_from(conversation: Conversation, message: Message) -> list[int]:
    """The messages on screen from `message` down (the page removes them for a new branch)."""
    tree = MessageTree.load(conversation)
    path = tree.path(branch_leaf_id(conversation, tree))
    below = path[path.index(message.pk) :] if message.pk in path else []
    shown = conversation.messages.filter(pk__in=below).exclude(role=MessageRole.TOOL)  # on their answers
    return sorted(shown.values_list("pk", flat=True))


def _trigger_top(tree: MessageTree, roles: dict[int, str], answer_id: int) -> int:
    """The first message of a failed answer's turn: up through what triggered it (tool results,
    a question) while each has no other child, stopping below the previous answer."""
    top = answer_id
    parent = tree.parents[top]
    while parent is not None and roles[parent] != MessageRole.ASSISTANT:
        if tree.children.get(parent, []) != [top]:
            break
        top, parent = parent, tree.parents[parent]
    return top


def _turn_below(tree: MessageTree, roles: dict[int, str], top_id: int) -> tuple[list[int], list[int]]:
    """(the turn's messages from `top_id` down to the next questions, those next questions)."""
    doomed, kept = [top_id], []
    stack = list(tree.children.get(top_id, []))
    while stack:
        current = stack.pop()
        if roles[current] == MessageRole.USER:
            kept.append(current)
        else:
            doomed.append(current)
            stack += tree.children.get(current, [])
    return doomed, kept
