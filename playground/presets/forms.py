"""The import form: a preset file pasted or uploaded, the team it goes to, the connection it runs on."""

from __future__ import annotations

from typing import Any

from django import forms

from playground.presets.setup import DOCUMENT_MAX_CHARS


class PresetImportForm(forms.Form):
    team = forms.TypedChoiceField(coerce=int, required=False, empty_value=None, label="Team")
    text = forms.CharField(
        required=False,
        strip=False,
        max_length=DOCUMENT_MAX_CHARS,
        label="Preset JSON",
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false", "data-json-editor": ""}),
    )
    file = forms.FileField(required=False, label="…or choose an exported file")
    connection = forms.TypedChoiceField(
        coerce=int,
        required=False,
        empty_value=None,
        label="Connection",
        help_text="By default, the team's connection with the name the file gives.",
    )

    def __init__(
        self,
        *args: Any,
        teams: list[tuple[int, str]] | None,
        connections: list[tuple[int, str]],
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        team_field = self.fields["team"]
        assert isinstance(team_field, forms.TypedChoiceField)
        if teams is None:  # a new version: the preset's team
            del self.fields["team"]
        else:
            team_field.choices = teams
        connection_field = self.fields["connection"]
        assert isinstance(connection_field, forms.TypedChoiceField)
        connection_field.choices = [("", "As named in the file"), *connections]

    def document_text(self) -> str:
        """The pasted text, or the uploaded file's (which then replaces it in the form, so a
        refused file can be fixed in place)."""
        upload = self.cleaned_data.get("file")
        if upload is None:
            return str(self.cleaned_data.get("text") or "")
        raw = upload.read(DOCUMENT_MAX_CHARS * 4 + 1)
        try:
            return str(raw.decode("utf-8-sig"))
        except UnicodeDecodeError:
            return ""
