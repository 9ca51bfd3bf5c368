"""A conversation as JSON: "Export JSON" (and "Copy JSON", which fetches the same) on the chat
page, and the import page that makes a new conversation of one. Thin views over
`chat.services.conversation_json`."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.text import slugify
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from playground.chat.domain.conversation_json import (
    DOCUMENT_MAX_BYTES,
    ConversationJsonInvalid,
    document_text,
)
from playground.chat.forms import ConversationImportForm
from playground.chat.models import Conversation
from playground.chat.services.conversation_json import (
    ImportTarget,
    ImportTargetRefused,
    conversation_export,
    conversation_import,
)
from playground.chat.services.conversations import ConversationNotFound
from playground.chat.views.model_picker import model_field_context
from playground.lib.web import HtmxHttpRequest, form_errors_add
from playground.providers.models import ProviderConnection
from playground.providers.selectors import connection_list_runnable

# What a pasted document may weigh before the page sends it as a file (form fields are read
# up to DATA_UPLOAD_MAX_MEMORY_SIZE; files are not counted), with room for the other fields.
PASTE_MAX_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE - 64 * 1024


@never_cache
@login_required
@require_GET
def conversation_export_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    """The conversation's current branch as a JSON file (viewers may export too)."""
    try:
        document = conversation_export(user=request.user, conversation_id=conversation_id)
    except ConversationNotFound:
        raise Http404("No such conversation.") from None
    response = HttpResponse(document_text(document), content_type="application/json; charset=utf-8")
    name = slugify(document["playground"]["title"])[:60] or "conversation"
    response["Content-Disposition"] = f'attachment; filename="{name}-{conversation_id}.json"'
    return response


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def conversation_import_view(request: HtmxHttpRequest) -> HttpResponse:
    """The import page; a refused document comes back in the box with every problem named."""
    connections = list(connection_list_runnable(user=request.user))
    form = ConversationImportForm(
        request.POST or (request.GET if request.htmx else None),
        request.FILES or None,
        connections=connections,
    )
    tried: ProviderConnection | None = None
    if request.method == "POST" and form.is_valid():
        conversation, tried = _import(request, form)
        if conversation is not None:
            return redirect("chat:conversation-detail", conversation_id=conversation.pk)
    context = _page_context(form, tried=tried)
    if request.htmx and request.method == "GET":
        return render(request, "chat/conversation_import.html#import_target", context)
    return render(request, "chat/conversation_import.html", context, status=400 if form.errors else 200)


def _import(
    request: HtmxHttpRequest, form: ConversationImportForm
) -> tuple[Conversation | None, ProviderConnection | None]:
    """(the new conversation, None), or (None, the connection a refused model was tried on) with
    the refusal on the form."""
    text = form.document_text()
    if form.errors:
        return None, None
    target = ImportTarget(
        team_id=form.cleaned_data["team"],
        connection_id=form.cleaned_data["connection"],
        model_id=form.cleaned_data["model_id"],
    )
    try:
        return conversation_import(user=request.user, text=text, target=target), None
    except ConversationJsonInvalid as exc:
        form.add_error("text", [f"{problem.path}: {problem.message}" for problem in exc.problems])
    except ImportTargetRefused as exc:
        form_errors_add(form, exc)
        return None, exc.connection
    except PermissionDenied as exc:
        form.add_error(None, str(exc))
    return None, None


def _page_context(form: ConversationImportForm, *, tried: ProviderConnection | None) -> dict[str, Any]:
    """The form, the chosen team's connections, and the models of the connection it will go to
    (the one chosen, the one a refused model was tried on, else the team's default)."""
    team = form.team_id()
    connections = [c for c in form.connections if c.team_id == team]
    chosen = str(form["connection"].value() or "")
    shown = tried or next((c for c in connections if str(c.pk) == chosen), None)
    shown = shown or next((c for c in connections if c.is_default), connections[0] if connections else None)
    return {
        "form": form,
        "team_connections": connections,
        "chosen_connection": str(tried.pk) if tried else chosen,
        "model_choices": model_field_context(shown)["model_choices"] if shown else [],
        "paste_max_bytes": PASTE_MAX_BYTES,
        "document_max_bytes": DOCUMENT_MAX_BYTES,
        "document_max_mb": DOCUMENT_MAX_BYTES // (1024 * 1024),
    }
