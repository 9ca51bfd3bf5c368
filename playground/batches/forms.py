"""The batch submission form: where the input comes from, which connection and model run it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms
from django.conf import settings

from playground.batches.inputs import MAX_ITEMS
from playground.batches.models import InputKind
from playground.providers.model_ids import MODEL_ID_MAX_CHARS, model_id_validate
from playground.providers.models import ProviderConnection

PASTE_MAX_CHARS = 2_000_000
PLACEHOLDER = '{"messages": [{"role": "user", "content": "Hello"}], "external_reference": "a1"}'


def upload_limit_text() -> str:
    return (
        f"Up to {MAX_ITEMS:,} items; files up to {settings.BATCH_UPLOAD_MAX_BYTES / 1e6:,.0f} MB, "
        f"pasted text up to {PASTE_MAX_CHARS / 1e6:,.0f} MB."
    )


class BatchCreateForm(forms.Form):
    connection = forms.TypedChoiceField(coerce=int, label="Connection")
    model_id = forms.CharField(
        max_length=MODEL_ID_MAX_CHARS,
        label="Model",
        validators=[model_id_validate],
        initial=settings.ENGINE_MODEL_ID,
    )
    name = forms.CharField(required=False, max_length=200, label="Name (optional)")
    input_kind = forms.ChoiceField(choices=InputKind.choices, initial=InputKind.JSONL, label="Input")
    text = forms.CharField(
        required=False,
        max_length=PASTE_MAX_CHARS,
        label="Paste",
        strip=False,
        widget=forms.Textarea(
            attrs={
                "rows": 8,
                "spellcheck": "false",
                "placeholder": PLACEHOLDER,
            }
        ),
    )
    file = forms.FileField(required=False, label="…or upload a file")
    template = forms.CharField(
        required=False,
        max_length=20_000,
        label="Prompt template (CSV)",
        help_text="Column names in braces are filled from each row, e.g. Summarise in one line: {text}",
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    conversation = forms.TypedChoiceField(
        coerce=int,
        required=False,
        empty_value=None,
        label="Start from a conversation's settings (optional)",
        help_text="Its connection and model run the batch, and its system prompt, tools, response format, "
        "parameters and prompt variables apply to every item: saved as a version of a preset named "
        "after it, or the team's identical version reused.",
    )
    preset_version = forms.TypedChoiceField(
        coerce=int,
        required=False,
        empty_value=None,
        label="…or configure it with a preset (optional)",
        help_text="Its connection and model run the batch (they replace those chosen above), and its "
        "system prompt, tools, response format and parameters apply to every item. Its prompt "
        "variables are filled per line: from a CSV column of the variable's name, or a JSONL line's "
        '"variables" object; else the preset\'s default.',
    )
    system_prompt = forms.CharField(
        required=False,
        max_length=20_000,
        label="System prompt (optional)",
        widget=forms.Textarea(attrs={"rows": 2}),
    )

    def __init__(
        self,
        *args: Any,
        connections: Sequence[ProviderConnection],
        conversations: Sequence[tuple[int, str]],
        preset_versions: Sequence[tuple[int, str]] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        connection_field = self.fields["connection"]
        assert isinstance(connection_field, forms.TypedChoiceField)
        connection_field.choices = [(c.pk, f"{c.team.name} · {c.name} ({c.spec.label})") for c in connections]
        conversation_field = self.fields["conversation"]
        assert isinstance(conversation_field, forms.TypedChoiceField)
        conversation_field.choices = [("", "—"), *conversations]
        preset_field = self.fields["preset_version"]
        assert isinstance(preset_field, forms.TypedChoiceField)
        preset_field.choices = [("", "—"), *preset_versions]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload = data.get("file")
        if upload is not None and upload.size > settings.BATCH_UPLOAD_MAX_BYTES:
            self.add_error("file", f"The file is larger than the limit. {upload_limit_text()}")
        if not data.get("text", "").strip() and upload is None:
            self.add_error("text", "Paste the input or upload a file.")
        if data.get("conversation") and data.get("preset_version"):
            self.add_error("preset_version", "Start from a conversation or a preset, not both.")
        if data.get("input_kind") == InputKind.CSV and not data.get("template", "").strip():
            self.add_error("template", "A CSV needs a prompt template naming its columns, e.g. {text}.")
        return data
