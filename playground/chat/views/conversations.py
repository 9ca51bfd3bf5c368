"""Managing conversations: rename, delete, change the connection or model, and the quick
switcher (⌘K / Ctrl+K). Thin views over `chat.services.conversations` and the selectors;
another team's conversation is a 404 on every one of them.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh

from playground.chat.forms import ModelChoiceForm, RenameForm
from playground.chat.models import Conversation
from playground.chat.presenters.conversations import conversation_rows
from playground.chat.selectors import conversation_page, conversation_search
from playground.chat.services.conversations import (
    ConversationNotFound,
    conversation_delete,
    conversation_for_run,
    conversation_model_change,
    conversation_rename,
)
from playground.chat.views.lookups import conversation_or_404
from playground.chat.views.model_picker import model_drawer_context
from playground.lib.web import HtmxHttpRequest, form_errors_add, refusal
from playground.providers.models import ProviderConnection
from playground.providers.selectors import connection_list_runnable

SWITCHER_SIZE = 8
ROW_TARGET_PREFIX = "conversation-row-"  # the list's rows; any other target is the chat page's title


@login_required
@require_POST
def conversation_rename_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    """Rename from the list (the row is redrawn) or from the chat page (its title is)."""
    form = RenameForm(request.POST)
    form.is_valid()
    error = ""
    try:
        conversation = conversation_rename(
            user=request.user, conversation_id=conversation_id, title=form.cleaned_data.get("title", "")
        )
    except ConversationNotFound:
        raise Http404("No such conversation.") from None
    except PermissionDenied as exc:
        return refusal(request, str(exc), status=403)
    except ValidationError as exc:
        error = " ".join(exc.messages)
        conversation = conversation_or_404(request, conversation_id)
    if not request.htmx:
        if error:
            return refusal(request, error)
        if request.POST.get("next") == "list":
            return redirect("chat:conversation-list")
        return redirect("chat:conversation-detail", conversation_id=conversation.pk)
    context: dict[str, Any] = {"rename_error": error, "rename_value": form.cleaned_data.get("title", "")}
    if (request.htmx.target or "").startswith(ROW_TARGET_PREFIX):
        context["row"] = conversation_rows([conversation], now=timezone.now())[0]
        context["manageable"] = {conversation.team_id}
        return render(request, "chat/conversation_list.html#conversation_row", context)
    context.update({"conversation": conversation, "can_run": True, "renamed": not error})
    return render(request, "chat/conversation_detail.html#title_bar", context)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def conversation_delete_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    """GET: what deleting takes with it, to confirm (pages without JavaScript); POST: delete."""
    if request.method == "GET":
        try:
            conversation = conversation_for_run(user=request.user, conversation_id=conversation_id)
        except ConversationNotFound:
            raise Http404("No such conversation.") from None
        except PermissionDenied as exc:
            return refusal(request, str(exc), status=403)
        context = {
            "conversation": conversation,
            "message_count": conversation.messages.count(),
            "image_count": conversation.attachments.count(),
        }
        return render(request, "chat/conversation_delete.html", context)
    try:
        conversation_delete(user=request.user, conversation_id=conversation_id)
    except ConversationNotFound:
        raise Http404("No such conversation.") from None
    except PermissionDenied as exc:
        return refusal(request, str(exc), status=403)
    if request.htmx and (request.htmx.target or "").startswith(ROW_TARGET_PREFIX):
        return HttpResponse("")  # the row goes
    if request.htmx:
        return HttpResponseClientRedirect(reverse("chat:conversation-list"))
    return redirect("chat:conversation-list")


@login_required
@require_POST
def conversation_model_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    """Change the connection or model of the next turn; the page is redrawn for it (its
    settings, tools and images follow the model). Errors come back on the drawer."""
    conversation = conversation_or_404(request, conversation_id)
    connections = team_connections(request, conversation)
    form = ModelChoiceForm(request.POST, connections=connections)
    if form.is_valid():
        try:
            conversation_model_change(
                user=request.user,
                conversation_id=conversation.pk,
                connection_id=form.cleaned_data["connection"],
                model_id=form.cleaned_data["model"],
            )
        except ValidationError as exc:
            form_errors_add(form, exc)
        except PermissionDenied as exc:
            form.add_error(None, str(exc))
        else:
            if request.htmx:
                return HttpResponseClientRefresh()
            return redirect("chat:conversation-detail", conversation_id=conversation.pk)
    context = {
        "conversation": conversation,
        **model_drawer_context(conversation.connection_id, conversation.model_id, connections, form=form),
        "model_drawer_open": True,
    }
    if request.htmx:  # errors are a normal answer to the drawer's own request, so htmx swaps them in
        return render(request, "chat/conversation_detail.html#model_drawer", context)
    return render(request, "chat/model_page.html", context, status=400)


@never_cache
@login_required
@require_GET
def conversation_switch_view(request: HtmxHttpRequest) -> HttpResponse:
    """The quick switcher's list: the conversations matching what was typed, or the most recent."""
    text = request.GET.get("q", "").strip()
    if text:
        page = conversation_search(user=request.user, text=text, size=SWITCHER_SIZE)
    else:
        page = conversation_page(user=request.user, size=SWITCHER_SIZE)
    context = {"rows": conversation_rows(page.conversations, now=timezone.now()), "query": text}
    return render(request, "chat/switcher.html", context)


def team_connections(request: HtmxHttpRequest, conversation: Conversation) -> list[ProviderConnection]:
    """The connections the conversation may move to: its own team's, where the user may run."""
    return [c for c in connection_list_runnable(user=request.user) if c.team_id == conversation.team_id]
