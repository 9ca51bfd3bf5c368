"""The evaluation pages' forms: a dataset, an upload, an item by hand, an experiment."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django import forms

from playground.chat.compare.forms import CompareTargetForm
from playground.chat.forms import SYSTEM_PROMPT_MAX_CHARS
from playground.evals.services.experiments import ConnectionTarget
from playground.evals.uploads import ItemFields, item_fields

CHECKS_PLACEHOLDER = (
    '{"kind": "contains"}\n{"kind": "regex", "pattern": "^\\\\d+$"}\n{"kind": "length", "max": 200}'
)


class DatasetCreateForm(forms.Form):
    team = forms.TypedChoiceField(coerce=int, label="Team")
    name = forms.CharField(max_length=200, label="Name")

    def __init__(self, *args: Any, teams: Sequence[tuple[int, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["team"]
        assert isinstance(field, forms.TypedChoiceField)
        field.choices = list(teams)


class DatasetUploadForm(forms.Form):
    file = forms.FileField(
        label="JSONL or CSV file",
        help_text="JSONL: one object a line with input (or messages), variables, expected, metadata. "
        "CSV: columns input, expected, metadata; any other column is a variable.",
    )


class DatasetItemForm(forms.Form):
    input = forms.CharField(
        required=False, label="Input (what the user says)", widget=forms.Textarea(attrs={"rows": 2})
    )
    variables = forms.CharField(
        required=False,
        label="Variables (JSON object)",
        widget=forms.TextInput(attrs={"placeholder": '{"tone": "terse"}'}),
    )
    expected = forms.CharField(
        required=False, label="Expected output", widget=forms.Textarea(attrs={"rows": 2})
    )
    metadata = forms.CharField(required=False, label="Metadata (JSON object)")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        raw: dict[str, Any] = {"input": data.get("input", ""), "expected": data.get("expected", "")}
        for name in ("variables", "metadata"):
            if text := (data.get(name) or "").strip():
                try:
                    raw[name] = json.loads(text)
                except ValueError:
                    self.add_error(name, "Not valid JSON.")
                    return data
        fields = item_fields(raw)
        if isinstance(fields, str):
            raise forms.ValidationError(fields[0].upper() + fields[1:])
        data["item"] = fields
        return data

    @property
    def item(self) -> ItemFields:
        fields: ItemFields = self.cleaned_data["item"]
        return fields


CONNECTION_SLOTS = 2  # connection targets the form offers, besides the preset versions


class ExperimentCreateForm(forms.Form):
    name = forms.CharField(required=False, max_length=200, label="Name (optional)")
    versions = forms.TypedMultipleChoiceField(
        coerce=int,
        required=False,
        label="Preset versions to compare",
        widget=forms.CheckboxSelectMultiple,
        help_text="Each target runs every item of the dataset's newest version, as a batch.",
    )
    checks = forms.CharField(
        required=False,
        label="Checks (one JSON object a line)",
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "placeholder": CHECKS_PLACEHOLDER}),
        help_text="Kinds: exact, contains, regex (pattern), json_schema (schema), json_path (path, value), "
        "length (min, max), numeric (tolerance). "
        "Without a value, a check compares with the item's expected output.",
    )

    def __init__(self, *args: Any, versions: Sequence[tuple[int, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["versions"]
        assert isinstance(field, forms.TypedMultipleChoiceField)
        field.choices = list(versions)

    def clean_checks(self) -> list[dict[str, Any]]:
        checks = []
        for number, line in enumerate((self.cleaned_data.get("checks") or "").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                check = json.loads(line)
            except ValueError:
                raise forms.ValidationError(f"Line {number} is not valid JSON.") from None
            checks.append(check)
        return checks


class ConnectionTargetForm(CompareTargetForm):
    """One connection target, as a Compare column (a model of a connection the user may run, two
    parameters) with a system prompt of its own. Left on "No target", it is no target. No
    affinity switch: batch items send no affinity key (docs/guide/evaluations.md)."""

    system_prompt = forms.CharField(
        required=False,
        max_length=SYSTEM_PROMPT_MAX_CHARS,
        label="System prompt (optional)",
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "Answer in one word. Tone: {{tone}}"}),
        help_text="{{name}} takes each item's variable of that name.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        del self.fields["use_affinity"]

    def connection_target(self) -> ConnectionTarget | None:
        """The target, or None for a slot left empty (call after `is_valid`)."""
        chosen = self.chosen()
        if chosen is None:
            return None
        return ConnectionTarget(
            connection_id=chosen[0],
            model_id=chosen[1],
            parameters=self.parameters(),
            system_prompt=self.cleaned_data.get("system_prompt") or "",
        )
