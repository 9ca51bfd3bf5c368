"""The forms of Team → Alerts: a destination, and the team's alert rules."""

from __future__ import annotations

from django import forms

from playground.alerts.models import SUBSCRIBABLE, DestinationKind


class DestinationForm(forms.Form):
    name = forms.CharField(max_length=80, help_text="How the delivery log names it, e.g. #oncall-llm")
    kind = forms.ChoiceField(choices=DestinationKind.choices, initial=DestinationKind.SLACK, label="Kind")
    url = forms.CharField(
        max_length=2000,
        label="URL",
        help_text=(
            "Slack: the incoming webhook URL. Teams: the workflow's webhook URL. Webhook: an HTTPS endpoint."
        ),
    )
    signing_secret = forms.CharField(
        required=False,
        max_length=200,
        widget=forms.PasswordInput(render_value=False),
        label="Signing secret (webhooks)",
        help_text="At least 16 characters; each request carries X-Playground-Signature made with it.",
    )
    kinds = forms.MultipleChoiceField(
        choices=[(kind.value, kind.label) for kind in SUBSCRIBABLE],
        initial=[kind.value for kind in SUBSCRIBABLE],
        widget=forms.CheckboxSelectMultiple,
        label="Alerts it receives",
    )


class AlertRulesForm(forms.Form):
    connection_errors = forms.IntegerField(min_value=1, max_value=10_000, label="Failed requests")
    connection_minutes = forms.IntegerField(min_value=1, max_value=1440, label="within minutes")
    spend_factor = forms.DecimalField(
        min_value=1,
        max_value=1000,
        max_digits=5,
        decimal_places=2,
        label="Spend above the 7-day median, times",
    )
    cache_drop_points = forms.IntegerField(min_value=1, max_value=100, label="Cached share drop, in points")
