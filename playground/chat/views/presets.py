"""Presets from the chat: save a conversation's setup as a preset version, start a conversation from one.

Another team's conversation, preset or version is a 404 here as everywhere.
"""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from playground.chat.services.conversations import ConversationNotFound
from playground.chat.services.preset_setups import (
    PresetVersionNotFound,
    conversation_from_preset,
    conversation_preset_save,
)
from playground.lib.web import HtmxHttpRequest, refusal
from playground.presets.models import NAME_MAX_CHARS
from playground.presets.services import PresetNotFound


class PresetSaveForm(forms.Form):
    preset = forms.IntegerField(required=False, min_value=1)  # empty: a new preset named `name`
    name = forms.CharField(required=False, max_length=NAME_MAX_CHARS)
    note = forms.CharField(required=False, max_length=200)


@login_required
@require_POST
def conversation_preset_save_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    """Save the setup; then the preset's page, on its newest version."""
    form = PresetSaveForm(request.POST)
    if not form.is_valid():
        return refusal(
            request, "; ".join(str(message) for errors in form.errors.values() for message in errors)
        )
    try:
        version = conversation_preset_save(
            user=request.user,
            conversation_id=conversation_id,
            preset_id=form.cleaned_data["preset"],
            name=form.cleaned_data["name"],
            note=form.cleaned_data["note"],
        )
    except (ConversationNotFound, PresetNotFound):
        raise Http404("No such conversation or preset.") from None
    except ValidationError as exc:
        return redirect_back_with_error(request, conversation_id, " ".join(exc.messages))
    except PermissionDenied as exc:
        return refusal(request, str(exc), status=403)
    return redirect("presets:preset-detail", preset_id=version.preset_id)


def redirect_back_with_error(request: HtmxHttpRequest, conversation_id: int, message: str) -> HttpResponse:
    """The conversation again, with the reason the preset was not saved (the form is small: its
    input is the conversation's own setup, nothing typed is lost but the name and note)."""
    response = redirect("chat:conversation-detail", conversation_id=conversation_id)
    response["Location"] += "?" + _query(preset_error=message, preset_name=request.POST.get("name", ""))
    return response


def _query(**values: str) -> str:
    query = QueryDict(mutable=True)
    query.update(values)
    return query.urlencode()


@login_required
@require_POST
def conversation_from_preset_view(request: HtmxHttpRequest, version_id: int) -> HttpResponse:
    try:
        conversation = conversation_from_preset(user=request.user, version_id=version_id)
    except PresetVersionNotFound:
        raise Http404("No such preset version.") from None
    except ValidationError as exc:
        return refusal(request, " ".join(exc.messages))
    except PermissionDenied as exc:
        return refusal(request, str(exc), status=403)
    return redirect("chat:conversation-detail", conversation_id=conversation.pk)
