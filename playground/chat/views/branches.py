"""Branch actions on a conversation's messages: show another branch, delete a turn, fork.

Thin views over `chat.services.branching`, which looks the conversation up in the user's
teams and the message in that conversation: another team's conversation or message, or a
message of another conversation, is a 404 on every path. Editing and regenerating stream an
answer, so they are commands of the chat socket (`chat.sockets.chat`), not views.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from playground.chat.forms import MessageWriteForm
from playground.chat.models import Conversation
from playground.chat.presenters.messages import message_views, system_changes_after
from playground.chat.selectors import BranchShown, branch_shown, conversation_system_changes
from playground.chat.services.branching import (
    chat_branch_switch,
    chat_fork,
    chat_message_write,
    chat_turn_delete,
)
from playground.chat.services.conversations import ConversationNotFound, conversation_for_run
from playground.lib.web import HtmxHttpRequest, refusal
from playground.usage.insights.cache_break_store import conversation_breaks_shown


def branch_context(conversation: Conversation, shown: BranchShown | None = None) -> dict[str, Any]:
    """What the messages partial shows: the branch on screen, with its forks' switchers
    (`shown` when the caller already loaded it for another part of the page)."""
    shown = shown or branch_shown(conversation=conversation)
    changes = conversation_system_changes(conversation=conversation)
    return {
        "messages_list": message_views(
            shown.messages,
            tools=conversation.tools,
            current_model=conversation.model_id,
            alternatives=shown.alternatives,
            breaks=conversation_breaks_shown(team_id=conversation.team_id, conversation_id=conversation.pk),
            system_changes=changes,
        ),
        "system_changes_after": system_changes_after(shown.messages, changes),
        "last_message_id": shown.messages[-1].pk if shown.messages else "",
    }


@login_required
@require_POST
def branch_switch_view(request: HtmxHttpRequest, conversation_id: int, message_id: int) -> HttpResponse:
    """Show the branch through `message_id`; htmx swaps the messages in place."""
    try:
        conversation = chat_branch_switch(
            user=request.user, conversation_id=conversation_id, message_id=message_id
        )
    except ConversationNotFound:
        raise Http404("No such message.") from None
    return _messages(request, conversation)


@login_required
@require_POST
def turn_delete_view(request: HtmxHttpRequest, conversation_id: int, message_id: int) -> HttpResponse:
    """Delete a turn (by its question), or a refused or failed answer and what asked it."""
    try:
        chat_turn_delete(user=request.user, conversation_id=conversation_id, message_id=message_id)
    except ConversationNotFound:
        raise Http404("No such message.") from None
    except ValidationError as exc:
        return refusal(request, " ".join(exc.messages))
    conversation = conversation_for_run(user=request.user, conversation_id=conversation_id)
    return _messages(request, conversation)


@login_required
@require_POST
def message_write_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    """A message written by hand (`chat_message_write`): an edited answer, or a message inserted
    after another (or first); the messages are redrawn on the new branch."""
    form = MessageWriteForm(request.POST)
    if not form.is_valid():
        return refusal(request, " ".join(str(m) for errors in form.errors.values() for m in errors))
    try:
        chat_message_write(
            user=request.user,
            conversation_id=conversation_id,
            role=form.cleaned_data["role"],
            text=form.cleaned_data["text"],
            replacing_id=form.cleaned_data["replacing"],
            after_id=form.cleaned_data["after"],
        )
    except ConversationNotFound:
        raise Http404("No such message.") from None
    except ValidationError as exc:
        return refusal(request, " ".join(exc.messages))
    return _messages(request, conversation_for_run(user=request.user, conversation_id=conversation_id))


@login_required
@require_POST
def conversation_fork_view(request: HtmxHttpRequest, conversation_id: int, message_id: int) -> HttpResponse:
    """A new conversation with this one's setup and its branch up to `message_id`."""
    try:
        fork = chat_fork(user=request.user, conversation_id=conversation_id, message_id=message_id)
    except ConversationNotFound:
        raise Http404("No such message.") from None
    url = reverse("chat:conversation-detail", args=[fork.pk])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _messages(request: HtmxHttpRequest, conversation: Conversation) -> HttpResponse:
    """The messages redrawn (htmx), or the page (a form posted without JavaScript)."""
    if not request.htmx:
        return redirect("chat:conversation-detail", conversation_id=conversation.pk)
    context = {"conversation": conversation, "can_send": conversation.connection_id is not None}
    return render(request, "chat/messages_redrawn.html", context | branch_context(conversation))
