""" "View code" for the next and past requests, and the composer's pre-flight cost.

Each view looks the conversation (or the answer) up through a selector scoped to the user's
teams: another team's is a 404. The next request's draft (text and image ids) comes in a POST
from the page (it can be long); a GET without one (the no-JavaScript links) shows the request
for an empty draft.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_http_methods, require_POST

from playground.chat.presenters.request_code import next_request_code, past_request_code, target_parse
from playground.chat.selectors import message_request_get
from playground.chat.services.history import CURRENT_LEAF
from playground.chat.services.preflight import PreflightRefused, PreflightUnavailable, preflight_for
from playground.chat.views.lookups import conversation_or_404
from playground.lib.web import HtmxHttpRequest


@login_required
@require_http_methods(["GET", "POST"])
def next_request_code_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    conversation = conversation_or_404(request, conversation_id)
    data = request.POST if request.method == "POST" else request.GET
    code = next_request_code(
        conversation=conversation,
        text=data.get("message", ""),
        attachment_ids=_ids(data),
        target=target_parse(data.get("target", "")),
        origin=_origin(request),
        after=_after(data),
    )
    context = {
        "code": code,
        "conversation": conversation,
        "code_url": request.path,
        "code_id": "next-code",
        "next_request": True,
    }
    if request.htmx:
        return render(request, "chat/request_code.html#code_panel", context)
    return render(request, "chat/request_code.html", context)


@login_required
@require_http_methods(["GET"])
def message_code_view(request: HtmxHttpRequest, conversation_id: int, message_id: int) -> HttpResponse:
    record = message_request_get(user=request.user, conversation_id=conversation_id, message_id=message_id)
    if record is None:
        raise Http404("No such answer.")
    code = past_request_code(
        record=record, target=target_parse(request.GET.get("target", "")), origin=_origin(request)
    )
    context = {
        "code": code,
        "conversation_id": conversation_id,
        "code_url": request.path,
        "code_id": f"code-{message_id}",
        "next_request": False,
    }
    if request.htmx:
        return render(request, "chat/request_code.html#code_panel", context)
    return render(request, "chat/request_code.html", context)


@login_required
@require_POST
def preflight_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    """The composer's pre-flight line for the draft in the form (htmx posts it as the user types)."""
    conversation = conversation_or_404(request, conversation_id)
    try:
        preflight = preflight_for(
            conversation=conversation,
            sender_id=request.user.pk,
            text=request.POST.get("message", ""),
            attachment_ids=_ids(request.POST),
            after=_after(request.POST),
        )
    except PreflightRefused as exc:
        return render(request, "chat/preflight.html", {"refusal": str(exc)})
    except PreflightUnavailable as exc:
        return render(request, "chat/preflight.html", {"problem": str(exc)})
    return render(request, "chat/preflight.html", {"preflight": preflight, "team": conversation.team})


def _ids(data: QueryDict) -> list[int]:
    """The draft's image ids; anything that is not one is left out (the send checks them again)."""
    return [int(value) for value in data.getlist("attachment") if value.isascii() and value.isdigit()]


def _after(data: QueryDict) -> int:
    """The last message the page shows (the composer's `after`); the current leaf without one.
    Another conversation's id finds no message in this one's tree, so it shows no history."""
    value = data.get("after", "")
    return int(value) if value.isascii() and value.isdigit() else CURRENT_LEAF


def _origin(request: HtmxHttpRequest) -> str:
    """This app's scheme and host, where its gateway answers."""
    return request.build_absolute_uri("/").rstrip("/")
