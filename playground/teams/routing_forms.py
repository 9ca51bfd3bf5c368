"""The Routing page's forms: the document as JSON, the common rules as fields, and a dry run."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from playground.routing.dry_run import SampleRequest
from playground.routing.schema import RULE_NAME

STATUSES_DEFAULT = "429, 500, 502, 503, 504, timeout, connect_error"


class PolicyDocumentForm(forms.Form):
    document = forms.CharField(
        label="Policy (JSON)",
        widget=forms.Textarea(attrs={"rows": 22, "spellcheck": "false", "class": "code-input"}),
    )
    note = forms.CharField(label="Note", required=False, max_length=300, help_text="What changed and why.")


class _TargetChoice(forms.Form):
    def __init__(self, *args: Any, connections: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            if name.endswith("_connection") and isinstance(field, forms.ChoiceField):
                field.choices = [(c, c) for c in connections]


class FallbackRuleForm(_TargetChoice):
    """A rule for the commonest case: try one target, then another, on failures."""

    name = forms.RegexField(regex=RULE_NAME, label="Rule name", max_length=100, initial="fallback")
    model = forms.CharField(
        label="When the model sent is", max_length=200, help_text="A model id or an alias."
    )
    first_connection = forms.ChoiceField(label="First: connection")
    first_model = forms.CharField(label="First: model", max_length=200)
    then_connection = forms.ChoiceField(label="Then: connection")
    then_model = forms.CharField(label="Then: model", max_length=200)
    on = forms.CharField(label="Move on after", initial=STATUSES_DEFAULT, max_length=200)

    def clean_on(self) -> list[int | str]:
        moves: list[int | str] = []
        for part in str(self.cleaned_data["on"]).split(","):
            item = part.strip()
            if item.isdigit():
                moves.append(int(item))
            elif item in ("timeout", "connect_error"):
                moves.append(item)
            elif item:
                raise ValidationError(f"{item!r} is neither an HTTP status nor timeout / connect_error.")
        return moves

    def rule(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "when": {"model": data["model"]},
            "strategy": "fallback",
            "on": data["on"],
            "targets": [
                {"connection": data["first_connection"], "model": data["first_model"]},
                {"connection": data["then_connection"], "model": data["then_model"]},
            ],
        }


class DowngradeRuleForm(_TargetChoice):
    """Requests with a tag go to a cheaper target once the month's budget passes a share."""

    name = forms.RegexField(regex=RULE_NAME, label="Rule name", max_length=100, initial="downgrade")
    tag = forms.CharField(label="Requests tagged", max_length=100, initial="non-critical")
    percent = forms.IntegerField(
        label="Once the month's budget is past (%)", min_value=1, max_value=100, initial=80
    )
    target_connection = forms.ChoiceField(label="Go to: connection")
    target_model = forms.CharField(label="Go to: model", max_length=200)

    def rule(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "when": {"tags_any": [data["tag"]], "budget_used_above": data["percent"] / 100},
            "targets": [{"connection": data["target_connection"], "model": data["target_model"]}],
        }


class DryRunForm(forms.Form):
    model = forms.CharField(label="Model", max_length=200)
    tags = forms.CharField(label="Tags", required=False, max_length=1000, help_text="Comma-separated.")
    metadata = forms.CharField(label="Metadata (JSON object)", required=False, max_length=4096)
    end_user = forms.CharField(label="End user", required=False, max_length=1024)
    session = forms.CharField(label="Session", required=False, max_length=1024)
    prompt_tokens = forms.IntegerField(label="Prompt tokens", min_value=0, initial=1000)
    completion_tokens = forms.IntegerField(label="Completion tokens", min_value=0, initial=200)
    budget_percent = forms.IntegerField(
        label="Budget used (%)", required=False, min_value=0, max_value=1000, help_text="Blank: as now."
    )
    stream = forms.BooleanField(label="Streamed", required=False)

    def clean_metadata(self) -> dict[str, Any] | None:
        raw = str(self.cleaned_data.get("metadata") or "").strip()
        if not raw:
            return None
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise ValidationError(f"Not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValidationError('Metadata must be a JSON object, e.g. {"tier": "free"}.')
        return value

    def sample(self, *, budget_used_now: float | None) -> SampleRequest:
        data = self.cleaned_data
        percent = data["budget_percent"]
        return SampleRequest(
            model=data["model"].strip(),
            tags=tuple(tag.strip() for tag in str(data["tags"] or "").split(",") if tag.strip()),
            metadata=data["metadata"],
            end_user=data["end_user"].strip(),
            session=data["session"].strip(),
            prompt_tokens=data["prompt_tokens"],
            completion_tokens=data["completion_tokens"],
            stream=data["stream"],
            budget_used=percent / 100 if percent is not None else budget_used_now,
        )
