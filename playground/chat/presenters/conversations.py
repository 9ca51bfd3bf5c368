"""Conversations as the lists and the composer show them: rows, model options, the composer's notes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from django.utils.timesince import timesince

from playground.catalog.models import CatalogModel
from playground.chat.models import Conversation
from playground.chat.presenters.usage import SEPARATOR


@dataclass(frozen=True)
class ModelChoice:
    value: str
    label: str


def model_choices(models: Iterable[CatalogModel], *, today: dt.date) -> list[ModelChoice]:
    """Catalogue models as select options, current ones first, retired ones labelled."""
    ordered = sorted(models, key=lambda model: (model.is_retired_on(today), model.display_name))
    choices = []
    for model in ordered:
        label = model.display_name  # the id is the option's value and shows on the chat page
        if model.deprecated_on is not None:  # `catalog_models_for_kind` loads the alias
            label += f" · {model.retirement_text(today)}"
        choices.append(ModelChoice(value=model.model_id, label=label))
    return choices


def listed_model_choices(listed: Iterable[str], catalogue: Iterable[CatalogModel]) -> list[ModelChoice]:
    """The ids an endpoint listed as select options, named as the catalogue names them."""
    names = {model.model_id: model.display_name for model in catalogue}
    return [ModelChoice(value=model_id, label=names.get(model_id, model_id)) for model_id in listed]


@dataclass(frozen=True)
class ConversationRow:
    id: int
    team_id: int
    title: str
    model_id: str
    team_name: str
    updated_at: dt.datetime
    updated: str  # "just now", "3 hours ago"


def conversation_rows(conversations: Iterable[Conversation], *, now: dt.datetime) -> list[ConversationRow]:
    """List entries; `conversations` must come with their team (`conversation_list` selects it)."""
    return [
        ConversationRow(
            id=conversation.pk,
            team_id=conversation.team_id,
            title=conversation.title or "Untitled conversation",
            model_id=conversation.model_id,
            team_name=conversation.team.name,
            updated_at=conversation.updated_at,
            updated=ago_text(conversation.updated_at, now=now),
        )
        for conversation in conversations
    ]


def ago_text(when: dt.datetime, *, now: dt.datetime) -> str:
    if (now - when).total_seconds() < 60:
        return "just now"
    return f"{timesince(when, now, depth=1)} ago"


def composer_note(conversation: Conversation, *, can_run: bool) -> str:
    """Why the composer is closed on this conversation; empty when the user can send."""
    if not can_run:
        return (
            f"You are a viewer in {conversation.team.name}: you can read this conversation but not send "
            "messages (sending costs money). Ask a team owner for the member role."
        )
    if conversation.connection_id is None:
        return "This conversation's connection was deleted; start a new conversation to continue."
    return ""


FORMAT_LABELS = {"json_object": "JSON object", "json_schema": "JSON schema"}


def composer_summary(conversation: Conversation) -> str:
    """The settings panel's one-line summary: "temperature 0.2 · max tokens 512 · JSON schema person"."""
    parts = []
    for name, value in (conversation.parameters or {}).items():
        label = name.replace("_", " ")
        if name == "stop":
            parts.append(f"{len(value)} stop sequence{'s' if len(value) != 1 else ''}")
        elif name == "thinking":
            parts.append(f"thinking {'on' if value else 'off'}")
        else:
            parts.append(f"{label} {value}")
    response_format = conversation.response_format or {}
    kind = response_format.get("type", "text")
    if kind in FORMAT_LABELS:
        name = (response_format.get("json_schema") or {}).get("name", "")
        parts.append(f"{FORMAT_LABELS[kind]} {name}".strip())
    return SEPARATOR.join(parts) or "Model defaults · text"
