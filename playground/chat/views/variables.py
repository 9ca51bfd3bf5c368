"""The Variables drawer of a conversation: save its prompt variables (thin over the service)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from playground.chat.models import Conversation
from playground.chat.presenters.variables import VariablesPanel, variables_panel
from playground.chat.selectors import BranchShown, branch_shown
from playground.chat.services.conversations import ConversationNotFound, conversation_variables_update
from playground.chat.views.lookups import conversation_or_404
from playground.lib.web import HtmxHttpRequest


def conversation_variables_panel(
    conversation: Conversation,
    *,
    rows: list[dict[str, str]] | None = None,
    errors: dict[str, list[str]] | None = None,
    saved: bool = False,
    shown: BranchShown | None = None,
) -> VariablesPanel:
    """The drawer for the branch on screen (which variables its texts use, which are missing),
    showing the stored variables or the `rows` just submitted (`shown` when the page already
    loaded the branch)."""
    messages = (shown or branch_shown(conversation=conversation)).messages
    return variables_panel(
        variables=conversation.variables if rows is None else rows,
        texts=[conversation.system_prompt, *(message.content for message in messages)],
        errors=errors,
        saved=saved,
    )


@login_required
@require_POST
def conversation_variables_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    """Save the drawer's rows (`name`, `type`, `value`, repeated; a row with no name is dropped)
    and `declare`, a placeholder to make a variable; errors come back inline, nothing saved."""
    conversation = conversation_or_404(request, conversation_id)
    rows = [
        {"name": name.strip(), "type": kind, "value": value}
        for name, kind, value in zip(
            request.POST.getlist("name"),
            request.POST.getlist("type"),
            request.POST.getlist("value"),
            strict=False,
        )
        if name.strip()
    ]
    try:
        conversation = conversation_variables_update(
            user=request.user,
            conversation_id=conversation.pk,
            rows=rows,
            declare=request.POST.get("declare", ""),
        )
    except ConversationNotFound:
        raise Http404("No such conversation.") from None
    except ValidationError as exc:
        panel = conversation_variables_panel(conversation, rows=rows, errors=exc.message_dict)
    except PermissionDenied as exc:
        panel = conversation_variables_panel(conversation, errors={"__all__": [str(exc)]})
    else:
        if not request.htmx:
            return redirect("chat:conversation-detail", conversation_id=conversation.pk)
        panel = conversation_variables_panel(conversation, saved=True)
    context = {"conversation": conversation, "variables_panel": panel, "can_configure": True}
    if request.htmx:  # errors are a normal answer to the drawer's own request, so htmx swaps them in
        return render(request, "chat/variables_panel.html", context)
    return render(request, "chat/variables_page.html", context, status=400)
