"""Chat pages: thin views over the chat service and selectors.

Every lookup goes through a selector scoped to the user's teams, so another team's
conversation or connection is a 404 on every path.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from playground.accounts.permissions import team_ids_can_run, user_can_run
from playground.chat.domain.tools import ToolsInvalid
from playground.chat.forms import (
    AFFINITY_HELP,
    AffinityForm,
    ComposerForm,
    ConversationCreateForm,
    ToolsForm,
    connection_label,
)
from playground.chat.models import Conversation
from playground.chat.presenters.conversations import composer_note, composer_summary, conversation_rows
from playground.chat.presenters.tools import ToolsPanel, tools_panel
from playground.chat.presenters.usage import request_view
from playground.chat.selectors import (
    CONVERSATION_PAGE_SIZE,
    COUNT_CAP,
    BadCursor,
    ConversationPage,
    branch_shown,
    conversation_count_capped,
    conversation_page,
    conversation_search,
    message_request_get,
)
from playground.chat.services.conversations import (
    ConversationNotFound,
    conversation_capabilities,
    conversation_composer_update,
    conversation_create,
    conversation_settings_update,
    conversation_tools_update,
)
from playground.chat.sockets.paths import chat_socket_path
from playground.chat.views.attachments import attachments_context
from playground.chat.views.branches import branch_context
from playground.chat.views.conversations import team_connections
from playground.chat.views.lookups import conversation_or_404
from playground.chat.views.model_picker import model_drawer_context, model_field_context
from playground.chat.views.variables import conversation_variables_panel
from playground.lib.web import HtmxHttpRequest, form_errors_add, refusal
from playground.presets.selectors import preset_list
from playground.providers.json_problems import Issue
from playground.providers.models import ProviderConnection
from playground.providers.request_rules import tools_support
from playground.providers.selectors import connection_get, connection_list_runnable
from playground.usage.insights.runway_selectors import conversation_runway

SIDEBAR_CONVERSATIONS = CONVERSATION_PAGE_SIZE  # the sidebar shows the list's first page
BAD_CURSOR = "That page link is not valid: start again from the newest conversations at /chat/."


@never_cache  # live data: going back must not show a stale copy
@login_required
@require_GET
def conversation_list_view(request: HtmxHttpRequest) -> HttpResponse:
    """The list, or with `q` the conversations that match it (`conversation_search`); the search
    box asks htmx for the results alone."""
    query = request.GET.get("q", "").strip()
    cursor = request.GET.get("after", "")
    try:
        if query:
            page = conversation_search(user=request.user, text=query, cursor=cursor)
        else:
            page = conversation_page(user=request.user, cursor=cursor)
    except BadCursor:
        return refusal(request, BAD_CURSOR)
    if request.htmx.target == "conversation-results":
        return render(request, "chat/conversation_list.html#results", _results_context(request, page, query))
    connections = _runnable_connections(request)
    form = ConversationCreateForm(connections=connections, initial=_initial(connections))
    return _list_page(request, form=form, connections=connections, page=page)


@login_required
@require_POST
def conversation_create_view(request: HtmxHttpRequest) -> HttpResponse:
    connections = _runnable_connections(request)
    form = ConversationCreateForm(request.POST, connections=connections)
    if form.is_valid():
        try:
            conversation = conversation_create(
                user=request.user,
                connection_id=form.cleaned_data["connection"],
                model_id=form.cleaned_data["model"],
                system_prompt=form.cleaned_data["system_prompt"],
                use_affinity=form.cleaned_data["use_affinity"],
            )
        except ValidationError as exc:
            form_errors_add(form, exc)
        except PermissionDenied as exc:
            form.add_error(None, str(exc) or "You may not start conversations in this team.")
        else:
            return redirect("chat:conversation-detail", conversation_id=conversation.pk)
    return _list_page(request, form=form, connections=connections, status=400)


@login_required
@require_GET
def model_options_view(request: HtmxHttpRequest) -> HttpResponse:
    """The model picker for one connection (swapped in when the connection changes)."""
    try:
        connection_id = int(request.GET.get("connection", ""))
    except ValueError:
        raise Http404("No such connection.") from None
    connection = connection_get(user=request.user, connection_id=connection_id)
    if connection is None:
        raise Http404("No such connection.")
    return render(request, "chat/conversation_list.html#model_field", model_field_context(connection))


@never_cache  # live data: going back must not show an answer-less copy
@login_required
@require_GET
def conversation_detail_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    conversation = conversation_or_404(request, conversation_id)
    can_run = user_can_run(user=request.user, team_id=conversation.team_id)
    connection = conversation.connection
    note = composer_note(conversation, can_run=can_run)
    shown = branch_shown(conversation=conversation)
    context = {
        "conversation": conversation,
        "connection_label": connection_label(connection) if connection else "deleted connection",
        **branch_context(conversation, shown),
        "can_send": not note,
        "can_run": can_run,
        "composer_note": note,
        "socket_path": chat_socket_path(conversation.pk),
        "sidebar": conversation_page(user=request.user, size=SIDEBAR_CONVERSATIONS).conversations,
        "affinity_help": AFFINITY_HELP,
        **_composer_context(conversation, can_run=can_run),
        "tools_panel": _tools_panel(conversation),
        "variables_panel": conversation_variables_panel(conversation, shown=shown),
        **attachments_context(conversation, can_send=not note),
        **model_drawer_context(
            conversation.connection_id, conversation.model_id, team_connections(request, conversation)
        ),
        **_preset_context(request, conversation, can_run=can_run),
        "runway": conversation_runway(team_id=conversation.team_id, conversation_id=conversation.pk)
        if not note
        else None,
    }
    return render(request, "chat/conversation_detail.html", context)


@login_required
@require_POST
def conversation_tools_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    """Save the tools editor; every problem comes back inline with its JSON path, nothing saved."""
    conversation = conversation_or_404(request, conversation_id)
    form = ToolsForm(request.POST)
    form.is_valid()  # every field is optional; a bad step count is the service's problem to name
    text = request.POST.get("tools", "")
    try:
        conversation = conversation_tools_update(
            user=request.user,
            conversation_id=conversation.pk,
            tools_text=text,
            tool_choice=form.cleaned_data.get("tool_choice") or "auto",
            parallel_tool_calls=form.cleaned_data.get("parallel_tool_calls", False),
            auto_mock_steps=form.cleaned_data.get("auto_mock_steps") or 0,
        )
    except ToolsInvalid as exc:
        panel = _tools_panel(conversation, text=text, problems=exc.problems)
    except ConversationNotFound:
        raise Http404("No such conversation.") from None
    except PermissionDenied as exc:
        panel = _tools_panel(conversation, text=text, problems=[Issue("$", str(exc))])
    else:
        if not request.htmx:
            return redirect("chat:conversation-detail", conversation_id=conversation.pk)
        panel = _tools_panel(conversation, saved=True)
    context = {"conversation": conversation, "tools_panel": panel, "can_configure": True}
    if request.htmx:  # errors are a normal answer to the panel's own request, so htmx swaps them in
        return render(request, "chat/tools_panel.html", context)
    return render(request, "chat/tools_page.html", context, status=400)


@login_required
@require_POST
def conversation_composer_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    """Save the composer settings; errors come back inline on the panel and nothing is saved."""
    conversation = conversation_or_404(request, conversation_id)
    form = ComposerForm(request.POST, caps=conversation_capabilities(conversation=conversation))
    saved = False
    prompt_before = conversation.system_prompt
    if form.is_valid():
        try:
            conversation = conversation_composer_update(
                user=request.user,
                conversation_id=conversation.pk,
                parameters=form.parameters(),
                response_format=form.cleaned_data["response_format"],
                schema_name=form.cleaned_data["schema_name"],
                schema_strict=form.cleaned_data["schema_strict"],
                schema_text=form.cleaned_data["schema"],
                system_prompt=form.cleaned_data["system_prompt"] if "system_prompt" in request.POST else None,
            )
        except ValidationError as exc:
            form_errors_add(form, exc)
        except PermissionDenied as exc:
            form.add_error(None, str(exc))
        else:
            saved = True
    if saved and not request.htmx:
        return redirect("chat:conversation-detail", conversation_id=conversation.pk)
    context = {
        "conversation": conversation,
        **_composer_context(conversation, can_run=True, form=None if saved else form, saved=saved),
    }
    if request.htmx:  # errors are a normal answer to the panel's own request, so htmx swaps them in
        if saved and conversation.system_prompt != prompt_before:
            shown = branch_shown(conversation=conversation)
            context |= {
                "messages_redrawn": True,
                "can_send": True,
                **branch_context(conversation, shown),
                "variables_panel": conversation_variables_panel(conversation, shown=shown),
            }
        return render(request, "chat/composer_saved.html", context)
    return render(request, "chat/composer_settings_page.html", context, status=400)


@login_required
@require_GET
def message_request_view(request: HtmxHttpRequest, conversation_id: int, message_id: int) -> HttpResponse:
    """The "View request" panel: the body as sent, the reply's HTTP status, the usage as received."""
    record = message_request_get(user=request.user, conversation_id=conversation_id, message_id=message_id)
    if record is None:
        raise Http404("No such answer.")
    context = {"request_info": request_view(record), "conversation_id": conversation_id}
    if request.htmx:
        return render(request, "chat/conversation_detail.html#request_info", context)
    return render(request, "chat/message_request_page.html", context)


@login_required
@require_http_methods(["POST"])
def conversation_affinity_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    form = AffinityForm(request.POST)
    form.is_valid()  # a missing checkbox is just "off"
    try:
        conversation = conversation_settings_update(
            user=request.user,
            conversation_id=conversation_id,
            use_affinity=form.cleaned_data.get("use_affinity", False),
        )
    except ConversationNotFound:
        raise Http404("No such conversation.") from None
    if not request.htmx:
        return redirect("chat:conversation-detail", conversation_id=conversation.pk)
    context = {"conversation": conversation, "can_run": True, "affinity_help": AFFINITY_HELP}
    return render(request, "chat/conversation_detail.html#affinity", context)


# --- helpers ---------------------------------------------------------------------------


def _composer_context(
    conversation: Conversation, *, can_run: bool, form: ComposerForm | None = None, saved: bool = False
) -> dict[str, Any]:
    """The settings panel: the form (or the one with errors), and each control's gate."""
    caps = conversation_capabilities(conversation=conversation)
    if form is None:
        initial = ComposerForm.initial_for(
            parameters=conversation.parameters or {},
            response_format=conversation.response_format,
            system_prompt=conversation.system_prompt,
        )
        form = ComposerForm(initial=initial, caps=caps)
    fields = [(form[control.name], control) for control in caps.controls.values()]
    return {
        "composer_form": form,
        "composer_fields": fields,
        "composer_caps": caps,
        "composer_saved": saved,
        "composer_open": saved or form.is_bound,
        "composer_summary": composer_summary(conversation),
        "can_configure": can_run and conversation.connection is not None,
    }


def _preset_context(request: HtmxHttpRequest, conversation: Conversation, *, can_run: bool) -> dict[str, Any]:
    """The "Save as preset" form: the team's presets to add a version to, and why the last save
    was refused (the save redirects back here with it)."""
    presets = preset_list(user=request.user).filter(team_id=conversation.team_id) if can_run else None
    return {
        "team_presets": list(presets.values_list("pk", "name")) if presets is not None else [],
        "preset_error": request.GET.get("preset_error", "")[:500],
        "preset_name": request.GET.get("preset_name", "")[:120],
    }


def _tools_panel(conversation: Conversation, **kwargs: Any) -> ToolsPanel:
    return tools_panel(
        tools=conversation.tools,
        tool_choice=conversation.tool_choice,
        parallel_tool_calls=conversation.parallel_tool_calls,
        auto_mock_steps=conversation.auto_mock_steps,
        support=tools_support(model_id=conversation.model_id),
        **kwargs,
    )


def _runnable_connections(request: HttpRequest) -> list[ProviderConnection]:
    """Connections of the teams where the user may send requests (viewers may not)."""
    return list(connection_list_runnable(user=request.user))


def _initial(connections: list[ProviderConnection]) -> dict[str, Any]:
    default = next((c for c in connections if c.is_default), connections[0] if connections else None)
    return {"connection": default.pk} if default else {}


def _results_context(request: HttpRequest, page: ConversationPage, query: str) -> dict[str, Any]:
    """One page of the list or of a search's results, with its pager."""
    older = QueryDict(mutable=True)
    if query:
        older["q"] = query
    older["after"] = page.next_cursor
    newest = QueryDict(mutable=True)
    if query:
        newest["q"] = query
    return {
        "conversations": conversation_rows(page.conversations, now=timezone.now()),
        "query": query,
        "older_query": older.urlencode() if page.next_cursor else "",
        "newest_query": newest.urlencode(),
        "is_first_page": not request.GET.get("after"),
        "manageable": team_ids_can_run(user=request.user),  # viewers may not rename or delete
    }


def _list_page(
    request: HttpRequest,
    *,
    form: ConversationCreateForm,
    connections: list[ProviderConnection],
    page: ConversationPage | None = None,
    status: int = 200,
) -> HttpResponse:
    """The list (one keyset page of it: the newest unless `page` says otherwise) and the form."""
    selected_id = form["connection"].value()
    selected = next((c for c in connections if str(c.pk) == str(selected_id)), None)
    if selected is None and connections:
        selected = connections[0]
    if page is None:
        page = conversation_page(user=request.user)
    count = conversation_count_capped(user=request.user)
    context = {
        "form": form,
        **_results_context(request, page, request.GET.get("q", "").strip()),
        "conversation_count": f"{COUNT_CAP:,}+" if count > COUNT_CAP else f"{count:,}",
        "has_connections": bool(connections),
        **(model_field_context(selected, form=form) if selected else {}),
    }
    return render(request, "chat/conversation_list.html", context, status=status)
