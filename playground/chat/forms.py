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
from playground.chat.tools import MAX_AUTO_MOCK_STEPS
from playground.providers.model_ids import MODEL_ID_MAX_CHARS, model_id_validate
from playground.providers.models import ProviderConnection
from playground.providers.request_rules import (
    RANGES,
    STOP_SEQUENCE_MAX_CHARS,
    STOP_SEQUENCES_MAX,
    Capabilities,
)

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
        elif not catalog_models_for_kind(kind=connection.kind).filter(model_id=chosen).exists():
            self.add_error("model_id", "Choose one of the models this connection serves.")
        else:
            cleaned["model"] = chosen
        return cleaned


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


def _ranged(field: type[forms.FloatField] | type[forms.IntegerField], wire: str) -> forms.Field:
    """A field bounded by the range every feature enforces for that request field."""
    limit = RANGES[wire]
    return field(required=False, min_value=limit.low, max_value=limit.high)


class ComposerForm(forms.Form):
    """The composer settings panel: types and ranges. Which fields the conversation's model
    and connection take is the service's check (`playground.chat.composer`)."""

    temperature = _ranged(forms.FloatField, "temperature")
    top_p = _ranged(forms.FloatField, "top_p")
    max_tokens = _ranged(forms.IntegerField, "max_tokens")
    seed = _ranged(forms.IntegerField, "seed")
    stop = forms.CharField(required=False, max_length=1_000, widget=forms.Textarea(attrs={"rows": 2}))
    presence_penalty = _ranged(forms.FloatField, "presence_penalty")
    frequency_penalty = _ranged(forms.FloatField, "frequency_penalty")
    reasoning_effort = forms.ChoiceField(
        required=False,
        choices=[("", "Model default"), ("low", "Low"), ("medium", "Medium"), ("high", "High")],
    )
    thinking = forms.ChoiceField(
        required=False, choices=[("", "Model default"), ("on", "On"), ("off", "Off")]
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
        if caps.max_tokens_limit is not None and caps.available("max_tokens"):
            limit = f"Up to {caps.max_tokens_limit:,} (the model's context window)."
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
        cls, *, parameters: dict[str, Any], response_format: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The form's values from what the conversation stores."""
        initial: dict[str, Any] = {name: parameters.get(name) for name in cls.PARAMETER_FIELDS}
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


# --- the chat WebSocket --------------------------------------------------------------


class BadCommand(Exception):
    """A WebSocket message we cannot act on; the message is shown to the user."""


@dataclass(frozen=True)
class SendCommand:
    text: str
    attachment_ids: tuple[int, ...] = ()  # uploaded images sent with the text
    after: int | None = None  # the last message on the page (None: the branch's current end)


@dataclass(frozen=True)
class StopCommand:
    pass


@dataclass(frozen=True)
class ContinueCommand:
    """Results for the tool calls of one answer: typed text or a mock's index, by call index."""

    message_id: int
    texts: dict[int, str]
    mocks: dict[int, int]


@dataclass(frozen=True)
class EditCommand:
    """The question `message_id` sent again with new text, as a new branch."""

    message_id: int
    text: str


@dataclass(frozen=True)
class RegenerateCommand:
    """The last answer `message_id` (or an unanswered question) answered again."""

    message_id: int


ChatCommand = SendCommand | StopCommand | ContinueCommand | EditCommand | RegenerateCommand


def chat_command_parse(raw: str | None) -> ChatCommand:
    """One client message: `{"action": "send", "message": "..."}`, `{"action": "stop"}`,
    `{"action": "edit", "message_id": 12, "message": "..."}`, `{"action": "regenerate",
    "message_id": 13}` or a tool continuation (`_continue_command`).

    The htmx ws extension sends the form's fields as JSON (plus a `HEADERS` object we
    ignore); `action` defaults to "send".
    """
    data = _socket_message(raw)
    action = data.get("action", "send")
    if action == "stop":
        return StopCommand()
    if action == "continue":
        return _continue_command(data)
    if action == "regenerate":
        return RegenerateCommand(message_id=_message_id(data))
    if action not in ("send", "edit"):
        raise BadCommand("Unknown action.")
    text = data.get("message", "")
    if not isinstance(text, str):
        raise BadCommand("The message must be text.")
    if action == "edit":
        return EditCommand(message_id=_message_id(data), text=text)
    after = _message_id(data, "after") if data.get("after") not in (None, "") else None
    return SendCommand(text=text, attachment_ids=_attachment_ids(data.get("attachment")), after=after)


def _message_id(data: dict[str, Any], key: str = "message_id") -> int:
    value = data.get(key)
    digits = str(value).strip() if isinstance(value, int | str) and not isinstance(value, bool) else ""
    if not (digits.isascii() and digits.isdigit()):
        raise BadCommand("That action needs the message it applies to.")
    return int(digits)


def _socket_message(raw: str | None) -> dict[str, Any]:
    """A socket message as a JSON object, its size checked before it is parsed."""
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
    return data


COMPARE_ACTIONS = ("run", "rerun", "stop")


def compare_command_parse(raw: str | None) -> str:
    """The compare socket's one kind of message, `{"action": "run" | "rerun" | "stop"}`:
    "run" starts a comparison never run (the page sends it when it opens), "rerun" runs all again."""
    action = _socket_message(raw).get("action")
    if action not in COMPARE_ACTIONS:
        raise BadCommand("Unknown action.")
    return str(action)


def _attachment_ids(value: Any) -> tuple[int, ...]:
    """The composer's hidden `attachment` fields: absent, one id, or a list of ids (htmx sends
    a single field as a string, several as a list)."""
    if value is None or value == "":
        return ()
    values = value if isinstance(value, list) else [value]
    limit = settings.ATTACHMENTS_PER_TURN
    if len(values) > limit:
        raise BadCommand(f"A message can carry at most {limit} images; nothing was sent.")
    ids: list[int] = []
    for item in values:
        digits = str(item).strip() if isinstance(item, int | str) and not isinstance(item, bool) else ""
        if not (digits.isascii() and digits.isdigit()):
            raise BadCommand("An attached image id was not a number; nothing was sent.")
        ids.append(int(digits))
    return tuple(dict.fromkeys(ids))


def _continue_command(data: dict[str, Any]) -> ContinueCommand:
    """`{"action": "continue", "message_id": "12", "result_0": "...", "mock_1": "0"}`: the
    tool-call form's fields (`result_<index>`, `mock_<index>`; an empty mock means none)."""
    try:
        message_id = int(data.get("message_id", ""))
    except (TypeError, ValueError):
        raise BadCommand("Continue needs the answer whose tool calls it answers.") from None
    texts: dict[int, str] = {}
    mocks: dict[int, int] = {}
    for key, value in data.items():
        prefix, _, index = key.partition("_")
        if prefix not in ("result", "mock") or not index.isdigit():
            continue
        if not isinstance(value, str):
            raise BadCommand("Tool results must be text.")
        if prefix == "result":
            texts[int(index)] = value
        elif value.strip():
            if not value.strip().isdigit():
                raise BadCommand("Pick a mock from the list.")
            mocks[int(index)] = int(value)
    return ContinueCommand(message_id=message_id, texts=texts, mocks=mocks)


class ToolsForm(forms.Form):
    """The tools editor. The definitions' JSON is checked by `chat.tools` (every problem with
    its path); this form only reads the fields."""

    tools = forms.CharField(required=False, strip=False, widget=forms.Textarea)
    tool_choice = forms.CharField(required=False, max_length=80)
    parallel_tool_calls = forms.BooleanField(required=False)
    auto_mock_steps = forms.IntegerField(required=False, min_value=0, max_value=MAX_AUTO_MOCK_STEPS)


# --- compare ---------------------------------------------------------------------------

TARGET_SLOTS = 4  # the form's columns; the first two are required


def target_value(connection_id: int, model_id: str) -> str:
    """A compare target's option value: the connection and the model in one select."""
    return f"{connection_id}:{model_id}"


class CompareForm(forms.Form):
    """The prompt, and the system prompt on a blank page (from a conversation it is the conversation's)."""

    prompt = forms.CharField(
        max_length=100_000,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "The prompt every target answers"}),
    )
    system_prompt = forms.CharField(
        required=False,
        max_length=SYSTEM_PROMPT_MAX_CHARS,
        label="System prompt (optional)",
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    conversation = forms.IntegerField(required=False, widget=forms.HiddenInput)
    preset_version = forms.IntegerField(required=False, widget=forms.HiddenInput)


class CompareTargetForm(forms.Form):
    """One column: a connection's model, two parameters, affinity. An empty target is no column."""

    target = forms.ChoiceField(required=False, label="Connection and model")
    temperature = _ranged(forms.FloatField, "temperature")
    max_tokens = _ranged(forms.IntegerField, "max_tokens")
    use_affinity = forms.BooleanField(required=False, initial=True, label="Session affinity")

    def __init__(self, *args: Any, targets: Sequence[tuple[str, Any]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["target"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "No target"), *targets]
        for name in ("temperature", "max_tokens"):
            self.fields[name].widget.attrs["placeholder"] = "Model default"

    def chosen(self) -> tuple[int, str] | None:
        """(connection id, model id), or None for a column left empty."""
        connection, _, model = (self.cleaned_data.get("target") or "").partition(":")
        return (int(connection), model) if connection.isdigit() and model else None

    def parameters(self) -> dict[str, Any]:
        return {name: self.cleaned_data.get(name) for name in ("temperature", "max_tokens")}
