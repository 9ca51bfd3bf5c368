"""Input parsing for the chat pages and the chat WebSocket."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.urls import reverse

from playground.catalog.selectors import catalog_models_for_kind
from playground.providers.model_ids import MODEL_ID_MAX_CHARS, model_id_validate
from playground.providers.models import ProviderConnection

SYSTEM_PROMPT_MAX_CHARS = 20_000
AFFINITY_HELP = (
    "Sends an x-session-affinity header with every request of this conversation, so they "
    "reach the same replica and the prompt prefix stays in its cache: cached input tokens "
    "cost about 1/6 of fresh ones."
)


def connection_label(connection: ProviderConnection) -> str:
    kind = connection.spec.label
    return connection.name if connection.name == kind else f"{connection.name} · {kind}"


class ConversationCreateForm(forms.Form):
    connection = forms.TypedChoiceField(coerce=int, label="Connection")
    model_id = forms.CharField(required=False, max_length=200, label="Model")
    custom_model_id = forms.CharField(
        required=False,
        max_length=MODEL_ID_MAX_CHARS,
        label="…or type a model id",
        validators=[model_id_validate],
    )
    system_prompt = forms.CharField(
        required=False,
        max_length=SYSTEM_PROMPT_MAX_CHARS,
        label="System prompt (optional)",
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "You are a concise, helpful assistant."}),
    )
    use_affinity = forms.BooleanField(
        required=False, initial=True, label="Session affinity", help_text=AFFINITY_HELP
    )

    def __init__(self, *args: Any, connections: Sequence[ProviderConnection], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections = {connection.pk: connection for connection in connections}
        field = self.fields["connection"]
        assert isinstance(field, forms.TypedChoiceField)
        field.choices = _grouped_by_team(connections)
        field.widget.attrs.update(
            {
                # Swap the model picker for the chosen connection's kind.
                "hx-get": reverse("chat:model-options"),
                "hx-target": "#model-field",
                "hx-swap": "outerHTML",
                "hx-trigger": "change",
            }
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        connection = self.connections.get(cleaned.get("connection", -1))
        if connection is None:
            return cleaned
        custom = (cleaned.get("custom_model_id") or "").strip()
        chosen = (cleaned.get("model_id") or "").strip()
        if custom:
            if not connection.spec.free_model_id:
                self.add_error(
                    "custom_model_id",
                    f"A {connection.spec.label} connection serves only the catalogue's models: choose one.",
                )
            cleaned["model"] = custom
        elif not chosen:
            self.add_error("model_id", "Choose a model.")
        elif not catalog_models_for_kind(kind=connection.kind).filter(model_id=chosen).exists():
            self.add_error("model_id", "Choose one of the models this connection serves.")
        else:
            cleaned["model"] = chosen
        return cleaned


class AffinityForm(forms.Form):
    use_affinity = forms.BooleanField(required=False)


def _grouped_by_team(connections: Sequence[ProviderConnection]) -> list[Any]:
    """Options, in optgroups per team when the user belongs to several."""
    teams: dict[str, list[tuple[int, str]]] = {}
    for connection in connections:
        teams.setdefault(connection.team.name, []).append((connection.pk, connection_label(connection)))
    if len(teams) == 1:
        return next(iter(teams.values()))
    return list(teams.items())


# --- the chat WebSocket --------------------------------------------------------------


class BadCommand(Exception):
    """A WebSocket message we cannot act on; the message is shown to the user."""


@dataclass(frozen=True)
class SendCommand:
    text: str


@dataclass(frozen=True)
class StopCommand:
    pass


ChatCommand = SendCommand | StopCommand


def chat_command_parse(raw: str | None) -> ChatCommand:
    """One client message: `{"action": "send", "message": "..."}` or `{"action": "stop"}`.

    The htmx ws extension sends the form's fields as JSON (plus a `HEADERS` object we
    ignore); `action` defaults to "send".
    """
    if raw is None:
        raise BadCommand("Messages must be text.")
    size, limit = len(raw.encode("utf-8", "surrogatepass")), settings.CHAT_MAX_FRAME_BYTES
    if size > limit:  # checked before parsing: parsing a huge frame costs memory too
        raise BadCommand(f"That message is {size // 1024:,} KB; the limit is {limit // 1024:,} KB. Not sent.")
    try:
        data = json.loads(raw)
    except ValueError:
        raise BadCommand("That message was not valid JSON; nothing was sent.") from None
    if not isinstance(data, dict):
        raise BadCommand("That message was not a JSON object; nothing was sent.")
    action = data.get("action", "send")
    if action == "stop":
        return StopCommand()
    if action != "send":
        raise BadCommand("Unknown action.")
    text = data.get("message", "")
    if not isinstance(text, str):
        raise BadCommand("The message must be text.")
    return SendCommand(text=text)
