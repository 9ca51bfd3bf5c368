"""The compare page's input: the prompt, and one form per target column."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms

from playground.chat.forms import SYSTEM_PROMPT_MAX_CHARS, ranged

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
    temperature = ranged(forms.FloatField, "temperature")
    max_tokens = ranged(forms.IntegerField, "max_tokens")
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
