"""The Data page's retention form: a blank field keeps that part for good."""

from __future__ import annotations

from django import forms


class RetentionForm(forms.Form):
    body_days = forms.IntegerField(
        required=False,
        label="Remove the text after (days)",
        help_text="Blank: texts are kept for as long as their records.",
    )
    record_days = forms.IntegerField(
        required=False,
        label="Delete whole records after (days)",
        help_text="Blank: records are kept for good.",
    )
