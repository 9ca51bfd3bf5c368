"""Forms of the team pages. The connection form is built from the provider registry."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib.auth import password_validation
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User
from django.db.models import QuerySet

from playground.accounts.models import Role, StoreMode
from playground.catalog.models import CatalogModel
from playground.providers.kinds import KINDS, ConnectionKind, kind_spec
from playground.providers.models import ProviderConnection
from playground.teams.services.api_keys import KeySettings
from playground.usage.models import TEAM_STORE_MODE

MONEY: dict[str, Any] = {"max_digits": 12, "decimal_places": 2, "min_value": Decimal(0)}
PRICE: dict[str, Any] = {"max_digits": 12, "decimal_places": 6, "min_value": Decimal(0)}


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class InvitationForm(forms.Form):
    role = forms.ChoiceField(
        choices=[(r.value, r.label) for r in Role if r != Role.OWNER], initial=Role.MEMBER
    )
    note = forms.CharField(
        required=False, max_length=200, label="For (optional)", help_text="A name, for your records."
    )
    email = forms.EmailField(
        required=False,
        label="Their email (optional)",
        help_text="Fills in the sign-up form if they have no account yet.",
    )

    def __init__(self, *args: Any, can_invite_owner: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if can_invite_owner:
            self.fields["role"].choices = Role.choices  # type: ignore[attr-defined]


class SignupForm(UserCreationForm[User]):
    """A new account from an invitation link: Django's username rules and password validators."""

    class Meta(UserCreationForm.Meta):
        model = User
        fields = ("username", "email")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["email"].required = True
        self.fields["email"].widget.attrs["autocomplete"] = "email"
        self.fields["username"].widget.attrs["autocomplete"] = "username"
        # The validators' rules as one sentence (Django's default is an HTML list).
        self.fields["password1"].help_text = " ".join(password_validation.password_validators_help_texts())


# --- connections -------------------------------------------------------------------------------------

CREATABLE_KINDS = [(kind, spec.label) for kind, spec in KINDS.items() if kind != ConnectionKind.ENGINE]


class KindForm(forms.Form):
    kind = forms.ChoiceField(choices=CREATABLE_KINDS, label="Kind")


class ConnectionForm(forms.ModelForm[ProviderConnection]):
    """The fields the connection's kind needs (`KindSpec`); the token is write-only."""

    token = forms.CharField(
        required=False,
        strip=True,
        max_length=500,
        label="API token",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    clear_token = forms.BooleanField(required=False, label="Remove the stored token")

    class Meta:
        model = ProviderConnection
        fields = ["name", "base_url", "account_id", "is_default"]
        labels = {"base_url": "Base URL", "account_id": "Account id", "is_default": "Default connection"}

    def __init__(self, *args: Any, kind: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        spec = kind_spec(kind)
        self.spec = spec
        if kind == ConnectionKind.ENGINE:
            for name in ("base_url", "account_id", "token", "clear_token"):
                del self.fields[name]
            return
        self.fields["base_url"].required = spec.needs_base_url
        self.fields["base_url"].help_text = (
            "Where requests go, e.g. https://api.example.com/v1. Changing it removes the stored token."
            if spec.needs_base_url
            else "Blank: the provider's own address. Changing it removes the stored token."
        )
        if spec.needs_account_id:
            self.fields["account_id"].required = True
        else:
            del self.fields["account_id"]
        if not spec.takes_token:
            del self.fields["token"], self.fields["clear_token"]
            return
        last4 = self.instance.token_last4 if self.instance.pk and self.instance.has_token else ""
        if self.instance.pk and self.instance.has_token:
            self.fields["token"].help_text = (
                f"A token ending in {last4} is stored. Leave blank to keep it."
                if last4
                else "A token is stored. Leave blank to keep it."
            )
        else:
            self.fields[
                "token"
            ].help_text = "Stored encrypted; afterwards only its last four characters are shown."
            del self.fields["clear_token"]

    def token_change(self) -> str | None:
        """The token to store ("" clears it, None keeps it)."""
        if self.cleaned_data.get("token"):
            return str(self.cleaned_data["token"])
        if self.cleaned_data.get("clear_token"):
            return ""
        return None


# --- price cards -------------------------------------------------------------------------------------


class PriceForm(forms.Form):
    model = forms.ModelChoiceField(queryset=CatalogModel.objects.order_by("display_name"), label="Model")
    effective_from = forms.DateField(label="From", widget=forms.DateInput(attrs={"type": "date"}))
    input_per_m = forms.DecimalField(label="Input $/M", **PRICE)
    cached_input_per_m = forms.DecimalField(
        label="Cached input $/M", required=False, help_text="Blank: no cache discount", **PRICE
    )
    cache_write_input_per_m = forms.DecimalField(
        label="Cache write $/M", required=False, help_text="Blank: writes cost the input price", **PRICE
    )
    output_per_m = forms.DecimalField(label="Output $/M", **PRICE)
    label = forms.CharField(max_length=160, required=False, label="Label")


class OverrideForm(PriceForm):
    effective_until = forms.DateField(
        label="Until (inclusive)", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    field_order = ["model", "effective_from", "effective_until"]


class GlobalCardForm(PriceForm):
    label = forms.CharField(max_length=200, label="Label", help_text="Where the price comes from")
    source = forms.CharField(max_length=300, required=False, label="Source URL")


# --- budgets -----------------------------------------------------------------------------------------


class TeamBudgetForm(forms.Form):
    monthly_limit_usd = forms.DecimalField(
        label="Monthly budget (USD)", required=False, help_text="Blank: no limit", **MONEY
    )
    alert_thresholds = forms.CharField(
        label="Alert at (% of the budget)",
        required=False,
        help_text="Comma-separated, e.g. 50, 80, 100. Each is shown as a banner and emailed once a month.",
    )
    time_zone = forms.CharField(
        label="Time zone", max_length=64, initial="UTC", help_text="Months start at midnight on the 1st here."
    )

    def clean_alert_thresholds(self) -> list[int]:
        raw = str(self.cleaned_data.get("alert_thresholds") or "")
        values = []
        for part in raw.replace(";", ",").split(","):
            part = part.strip().rstrip("%").strip()
            if not part:
                continue
            if not part.isdigit() or not 1 <= int(part) <= 1000:
                raise forms.ValidationError(f"{part!r} is not a whole percentage between 1 and 1000.")
            values.append(int(part))
        return sorted(set(values))

    def clean_time_zone(self) -> str:
        value = str(self.cleaned_data["time_zone"]).strip()
        if value not in zoneinfo.available_timezones():
            raise forms.ValidationError(f"{value!r} is not a time zone name (e.g. UTC, Europe/Paris).")
        return value


class UnpricedForm(forms.Form):
    allow_unpriced = forms.BooleanField(required=False)


class TeamStoreForm(forms.Form):
    store_mode = forms.ChoiceField(choices=StoreMode.choices, widget=forms.RadioSelect, label="Records keep")


class UpstreamRedactionForm(forms.Form):
    upstream_redaction = forms.BooleanField(
        required=False, label="Send placeholders to the model instead of sensitive values"
    )


class MemberBudgetForm(forms.Form):
    monthly_budget_usd = forms.DecimalField(label="Monthly budget (USD)", required=False, **MONEY)


# --- API keys ----------------------------------------------------------------------------------------


FOLLOWS_TEAM = "team"  # the key form's value for a key that keeps what its team's mode says


class ApiKeyForm(forms.Form):
    """A key's settings; the service checks them against the team and the connection."""

    name = forms.CharField(max_length=120, label="Name", help_text="What uses it, e.g. billing-agent.")
    connection = forms.ModelChoiceField(
        queryset=ProviderConnection.objects.none(),
        empty_label=None,
        label="Connection",
        help_text="Where its requests go. The key decides the connection, whatever the client asks.",
    )
    follows_policy = forms.BooleanField(
        required=False,
        label="Follow the team's routing policy",
        help_text="Its requests go where the team's routing rules send them (fallbacks, downgrades); "
        "the connection above takes those no rule matches.",
    )
    allowed_models = forms.MultipleChoiceField(
        required=False, label="Allowed models", widget=forms.CheckboxSelectMultiple
    )
    other_models = forms.CharField(
        required=False, max_length=2000, label="…or type model ids", help_text="Comma-separated."
    )
    monthly_budget_usd = forms.DecimalField(
        label="Monthly budget (USD)",
        required=False,
        help_text="Its own, on top of the team's and its creator's. Blank: none of its own.",
        **MONEY,
    )
    requests_per_minute = forms.IntegerField(
        label="Requests per minute", required=False, min_value=1, help_text="Blank: no limit."
    )
    tokens_per_minute = forms.IntegerField(
        label="Tokens per minute", required=False, min_value=1, help_text="Blank: no limit."
    )
    expires_at = forms.DateTimeField(
        label="Expires (UTC)",
        required=False,
        help_text="Blank: never.",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    store_mode = forms.ChoiceField(
        choices=[(FOLLOWS_TEAM, "The team's mode"), *StoreMode.choices],
        initial=StoreMode.REDACTED,
        required=False,  # a client that sends none gets the default, redacted
        label="Its records keep",
        help_text="What the request log keeps of each request's text. Redacted: e-mail addresses, phone and "
        "card numbers, IBANs, IP addresses and secrets replaced by placeholders. A request can ask for "
        "less with x-playground-store, never for more.",
    )

    def __init__(
        self,
        *args: Any,
        connections: QuerySet[ProviderConnection],
        model_ids: Sequence[str],
        models_url: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        connection = self.fields["connection"]
        assert isinstance(connection, forms.ModelChoiceField)
        connection.queryset = connections
        # Swap the models field for the chosen connection's (`models_url` answers htmx with it).
        connection.widget.attrs.update(
            {"hx-get": models_url, "hx-target": "#key-models", "hx-swap": "outerHTML", "hx-trigger": "change"}
        )
        # The connection's models, and any ticked already (a key's, or one posted) that it no
        # longer lists: the service says which it does not serve.
        models = self.fields["allowed_models"]
        assert isinstance(models, forms.MultipleChoiceField)
        ticked = [str(model_id) for model_id in self["allowed_models"].value() or []]
        models.choices = [(model_id, model_id) for model_id in dict.fromkeys([*model_ids, *ticked])]

    def head_fields(self) -> list[forms.BoundField]:
        return [self["name"], self["connection"], self["follows_policy"]]

    def limit_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in ("monthly_budget_usd", "requests_per_minute", "tokens_per_minute")]

    def expiry_fields(self) -> list[forms.BoundField]:
        return [self["expires_at"], self["store_mode"]]

    def clean_expires_at(self) -> dt.datetime | None:
        """The key's own expiry when the field still shows it: the field has minutes only, and
        saving other settings must not move (nor re-check) an expiry nobody touched."""
        value: dt.datetime | None = self.cleaned_data.get("expires_at")
        kept = self.initial.get("expires_at")
        if value and isinstance(kept, dt.datetime) and value == kept.replace(second=0, microsecond=0):
            return kept
        return value

    def clean_store_mode(self) -> str:
        """The key's `store_mode`: "" for the team's, redacted when none was sent."""
        value = str(self.cleaned_data.get("store_mode") or StoreMode.REDACTED)
        return TEAM_STORE_MODE if value == FOLLOWS_TEAM else value

    def clean_other_models(self) -> list[str]:
        raw = str(self.cleaned_data.get("other_models") or "")
        return [part.strip() for part in raw.replace("\n", ",").split(",") if part.strip()]

    def key_settings(self) -> KeySettings:
        data = self.cleaned_data
        return KeySettings(
            name=data["name"].strip(),
            connection_id=data["connection"].pk,
            allowed_models=(*data["allowed_models"], *data["other_models"]),
            monthly_budget_usd=data["monthly_budget_usd"],
            requests_per_minute=data["requests_per_minute"],
            tokens_per_minute=data["tokens_per_minute"],
            expires_at=data["expires_at"],
            follows_policy=data["follows_policy"],
            store_mode=data["store_mode"],
        )


class EndUserEraseForm(forms.Form):
    end_user = forms.CharField(
        label="End user",
        max_length=1024,
        help_text="As its requests sent it: x-playground-user or the body's user field",
    )
