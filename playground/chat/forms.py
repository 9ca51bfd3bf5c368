"""Input parsing for the chat pages (socket messages: `sockets.commands`; compare: `compare.forms`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django import forms
from django.urls import reverse

from playground.catalog.selectors import catalog_models_for_kind
from playground.chat.domain.conversation_json import DOCUMENT_MAX_BYTES
from playground.chat.domain.tools import MAX_AUTO_MOCK_STEPS
from playground.providers.model_ids import MODEL_ID_MAX_CHARS, model_id_validate
from playground.providers.models import ProviderConnection
from playground.providers.request_rules import (
    RANGES,
    STOP_SEQUENCE_MAX_CHARS,
    STOP_SEQUENCES_MAX,
    Capabilities,
)
from playground.providers.selectors import connection_models_listed

SYSTEM_PROMPT_MAX_CHARS = 20_000
AFFINITY_HELP = (
    "Sends an x-session-affinity header with every request of this conversation, so they "
    "reach the same replica and the prompt prefix stays in its cache: cached input tokens "
    "cost about 1/6 of fresh ones."
)


def connection_label(connection: ProviderConnection) -> str:
    kind = connection.spec.label
    return connection.name if connection.name == kind else f"{connection.name} · {kind}"


class ModelChoiceForm(forms.Form):
    """A connection and a model it serves: a catalogue model of its kind, or (where the kind
    takes any id) a typed one. Starts a conversation, or changes the one it sends to."""

    connection = forms.TypedChoiceField(coerce=int, label="Connection")
    model_id = forms.CharField(required=False, max_length=200, label="Model")
    custom_model_id = forms.CharField(
        required=False,
        max_length=MODEL_ID_MAX_CHARS,
        label="…or type a model id",
        validators=[model_id_validate],
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
        elif not _offered(connection, chosen):
            self.add_error("model_id", "Choose one of the models this connection serves.")
        else:
            cleaned["model"] = chosen
        return cleaned


def _offered(connection: ProviderConnection, model_id: str) -> bool:
    """Whether the model picker offers `model_id` for `connection` (`model_picker`)."""
    listed = connection_models_listed(connection)
    if listed is not None:
        return model_id in listed
    return catalog_models_for_kind(kind=connection.kind).filter(model_id=model_id).exists()


class MessageWriteForm(forms.Form):
    """A message written by hand: its role and text, and where (`chat_message_write`)."""

    role = forms.CharField(max_length=20)  # which roles: the service says
    text = forms.CharField(
        strip=False, error_messages={"required": "Type a message first."}
    )  # length: the service
    replacing = forms.IntegerField(required=False, min_value=1)
    after = forms.IntegerField(required=False, min_value=1)


class ConversationCreateForm(ModelChoiceForm):
    system_prompt = forms.CharField(
        required=False,
        max_length=SYSTEM_PROMPT_MAX_CHARS,
        label="System prompt (optional)",
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "You are a concise, helpful assistant."}),
    )
    use_affinity = forms.BooleanField(
        required=False, initial=True, label="Session affinity", help_text=AFFINITY_HELP
    )


class RenameForm(forms.Form):
    title = forms.CharField(required=False, max_length=1_000, label="Title")


class AffinityForm(forms.Form):
    use_affinity = forms.BooleanField(required=False)


def ranged(field: type[forms.FloatField] | type[forms.IntegerField], wire: str) -> forms.Field:
    """A field bounded by the range every feature enforces for that request field."""
    limit = RANGES[wire]
    return field(required=False, min_value=limit.low, max_value=limit.high)


class ComposerForm(forms.Form):
    """The composer settings panel: types and ranges. Which fields the conversation's model
    and connection take is the service's check (`playground.chat.domain.composer`)."""

    temperature = ranged(forms.FloatField, "temperature")
    top_p = ranged(forms.FloatField, "top_p")
    max_tokens = ranged(forms.IntegerField, "max_tokens")
    seed = ranged(forms.IntegerField, "seed")
    stop = forms.CharField(required=False, max_length=1_000, widget=forms.Textarea(attrs={"rows": 2}))
    presence_penalty = ranged(forms.FloatField, "presence_penalty")
    frequency_penalty = ranged(forms.FloatField, "frequency_penalty")
    reasoning_effort = forms.ChoiceField(
        required=False,
        choices=[("", "Model default"), ("low", "Low"), ("medium", "Medium"), ("high", "High")],
    )
    thinking = forms.ChoiceField(
        required=False, choices=[("", "Model default"), ("on", "On"), ("off", "Off")]
    )
    # Absent from a post (a client that sends only parameters): the system prompt stays as it is.
    system_prompt = forms.CharField(
        required=False,
        max_length=SYSTEM_PROMPT_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "You are a concise, helpful assistant."}),
    )
    response_format = forms.ChoiceField(
        choices=[("text", "Text"), ("json_object", "JSON object"), ("json_schema", "JSON schema")]
    )
    schema_name = forms.CharField(required=False, max_length=64)
    schema_strict = forms.BooleanField(required=False)
    schema = forms.CharField(required=False, strip=False, widget=forms.Textarea)

    PARAMETER_FIELDS = (
        "temperature",
        "top_p",
        "max_tokens",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "reasoning_effort",
        "thinking",
    )

    def __init__(self, *args: Any, caps: Capabilities, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.caps = caps
        for control in caps.controls.values():
            field = self.fields[control.name]
            field.help_text = control.reason or control.parameter.help
            if not control.available:  # shown with its reason; a posted value is ignored
                field.disabled = True
                self.initial[control.name] = None
        if caps.window is not None and caps.available("max_tokens"):
            window = caps.window
            limit = f"Up to {window.tokens:,} (the model's context window, {window.source})."
            self.fields["max_tokens"].help_text = limit
        self.fields["schema"].widget.attrs.update({"data-json-editor": "", "rows": 10, "spellcheck": "false"})

    def clean_stop(self) -> list[str]:
        lines = [line for line in self.cleaned_data.get("stop", "").splitlines() if line.strip()]
        if len(lines) > STOP_SEQUENCES_MAX:
            raise forms.ValidationError(f"At most {STOP_SEQUENCES_MAX} stop sequences (one per line).")
        if any(len(line) > STOP_SEQUENCE_MAX_CHARS for line in lines):
            raise forms.ValidationError(
                f"A stop sequence can be at most {STOP_SEQUENCE_MAX_CHARS} characters."
            )
        return lines

    def clean_thinking(self) -> bool | None:
        return {"on": True, "off": False}.get(self.cleaned_data.get("thinking", ""))

    def parameters(self) -> dict[str, Any]:
        return {name: self.cleaned_data.get(name) for name in self.PARAMETER_FIELDS}

    @classmethod
    def initial_for(
        cls, *, parameters: dict[str, Any], response_format: dict[str, Any] | None, system_prompt: str = ""
    ) -> dict[str, Any]:
        """The form's values from what the conversation stores."""
        initial: dict[str, Any] = {name: parameters.get(name) for name in cls.PARAMETER_FIELDS}
        initial["system_prompt"] = system_prompt
        initial["stop"] = "\n".join(parameters.get("stop") or [])
        thinking = parameters.get("thinking")
        initial["thinking"] = "" if thinking is None else ("on" if thinking else "off")
        initial["response_format"] = (response_format or {}).get("type", "text")
        spec = (response_format or {}).get("json_schema") or {}
        initial["schema_name"] = spec.get("name", "")
        initial["schema_strict"] = bool(spec.get("strict"))
        initial["schema"] = json.dumps(spec["schema"], indent=2) if "schema" in spec else ""
        return initial


def _grouped_by_team(connections: Sequence[ProviderConnection]) -> list[Any]:
    """Options, in optgroups per team when the user belongs to several."""
    teams: dict[str, list[tuple[int, str]]] = {}
    for connection in connections:
        teams.setdefault(connection.team.name, []).append((connection.pk, connection_label(connection)))
    if len(teams) == 1:
        return next(iter(teams.values()))
    return list(teams.items())


class ToolsForm(forms.Form):
    """The tools editor. The definitions' JSON is checked by `chat.domain.tools` (every problem with
    its path); this form only reads the fields."""

    tools = forms.CharField(required=False, strip=False, widget=forms.Textarea)
    tool_choice = forms.CharField(required=False, max_length=80)
    parallel_tool_calls = forms.BooleanField(required=False)
    auto_mock_steps = forms.IntegerField(required=False, min_value=0, max_value=MAX_AUTO_MOCK_STEPS)


class ConversationImportForm(forms.Form):
    """A conversation's JSON, pasted or uploaded, and where it goes (`conversation_import`: the
    document and the target are the service's to check, every problem at its JSON path)."""

    text = forms.CharField(
        required=False,
        strip=False,
        label="Conversation JSON",
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false", "autocomplete": "off"}),
    )
    file = forms.FileField(required=False, label="…or choose a file (read instead of the box)")
    team = forms.TypedChoiceField(coerce=int, label="Team")
    connection = forms.TypedChoiceField(coerce=int, required=False, empty_value=None, label="Connection")
    model_id = forms.CharField(required=False, max_length=MODEL_ID_MAX_CHARS, label="Model")

    def __init__(self, *args: Any, connections: Sequence[ProviderConnection], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections = list(connections)
        team_field, connection_field = self.fields["team"], self.fields["connection"]
        assert isinstance(team_field, forms.TypedChoiceField)
        assert isinstance(connection_field, forms.TypedChoiceField)
        team_field.choices = list({c.team_id: (c.team_id, c.team.name) for c in self.connections}.values())
        # Any of them validates: the service refuses another team's, with the reason.
        connection_field.choices = [
            ("", "As the document names it"),
            *((c.pk, c.name) for c in self.connections),
        ]
        team_field.widget.attrs.update(
            {
                # Swap in the chosen team's connections and their models.
                "hx-get": reverse("chat:conversation-import"),
                "hx-target": "#import-target",
                "hx-swap": "outerHTML",
                "hx-trigger": "change",
            }
        )

    def clean_file(self) -> Any:
        upload = self.cleaned_data.get("file")
        if upload is not None and upload.size > DOCUMENT_MAX_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size / (1024 * 1024):.1f} MB; at most "
                f"{DOCUMENT_MAX_BYTES / (1024 * 1024):.1f} MB are read."
            )
        return upload

    def document_text(self) -> str:
        """The chosen file's text, else the box's. The file's text then fills the box, so a
        refused document can be fixed in place."""
        upload = self.cleaned_data.get("file")
        if upload is None:
            return str(self.cleaned_data.get("text") or "")
        try:
            text = str(upload.read().decode("utf-8-sig"))
        except UnicodeDecodeError:
            self.add_error("file", "The file is not UTF-8 text: choose the JSON file an export wrote.")
            return ""
        self.data = {**self.data, "text": text}
        return text

    def team_id(self) -> int | None:
        """The team shown: the one chosen, else the first."""
        teams = [connection.team_id for connection in self.connections]
        chosen = str(self["team"].value())
        return next((team for team in teams if str(team) == chosen), teams[0] if teams else None)
