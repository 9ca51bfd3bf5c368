"""Reads of the API keys pages: a team's keys with this budget month's spend, and the models a
key of a connection may be limited to. Never a secret: only the prefix is stored to show."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from django.utils import timezone

from playground.accounts.models import Team
from playground.catalog.selectors import catalog_models_for_kind
from playground.providers.connection_check import connection_models_served
from playground.providers.kinds import ConnectionKind
from playground.providers.models import ProviderConnection
from playground.usage.budgets import budget_month, key_spend
from playground.usage.models import ApiKey
from playground.usage.money import money

ACTIVE, EXPIRED, REVOKED = "active", "expired", "revoked"


@dataclass(frozen=True)
class ApiKeyRow:
    key: ApiKey
    state: str  # ACTIVE, EXPIRED or REVOKED
    spent: str  # this budget month, in the team's time zone
    budget: str  # "" when the key has no budget of its own
    limits: list[str]  # ["60 requests/min", "20,000 tokens/min"], or none


def api_key_rows(*, team: Team, key_id: int | None = None, now: dt.datetime | None = None) -> list[ApiKeyRow]:
    """The team's keys (or the one `key_id`), newest first, revoked ones last; three queries."""
    now = now or timezone.now()
    spend = key_spend(team=team, month=budget_month(team, now=now))
    keys = ApiKey.objects.filter(team=team).select_related("connection", "created_by")
    if key_id is not None:
        keys = keys.filter(pk=key_id)
    rows = [
        ApiKeyRow(
            key=key,
            state=api_key_state(key, now=now),
            spent=money(spend.get(key.pk, Decimal(0))),
            budget=money(key.monthly_budget_usd) if key.monthly_budget_usd is not None else "",
            limits=_limits(key),
        )
        for key in keys.order_by("-created_at", "-id")
    ]
    return sorted(rows, key=lambda row: row.state == REVOKED)


def api_key_state(key: ApiKey, *, now: dt.datetime) -> str:
    if key.revoked_at is not None:
        return REVOKED
    if key.expires_at is not None and key.expires_at <= now:
        return EXPIRED
    return ACTIVE


def _limits(key: ApiKey) -> list[str]:
    parts = []
    if key.requests_per_minute is not None:
        parts.append(f"{key.requests_per_minute:,} requests/min")
    if key.tokens_per_minute is not None:
        parts.append(f"{key.tokens_per_minute:,} tokens/min")
    return parts


def api_keys_unrevoked(*, team: Team) -> list[ApiKey]:
    """The team's keys that are not revoked, by name (what the Data page lists with their modes)."""
    return list(ApiKey.objects.filter(team=team, revoked_at__isnull=True).order_by("name"))


def api_key_for(*, team_id: int, key_id: int) -> ApiKey | None:
    return ApiKey.objects.select_related("connection").filter(team_id=team_id, pk=key_id).first()


@dataclass(frozen=True)
class ModelOptions:
    ids: list[str]
    source: str  # where the list comes from, for the form's help
    served: bool = False  # the ids are what the connection serves (or listed), not the catalogue's


def model_options(connection: ProviderConnection) -> ModelOptions:
    """The model ids a key on `connection` may be limited to: those it serves (the engine asked
    now, another connection as its last test listed them), else the catalogue's for its kind.
    Blocking."""
    served = connection_models_served(connection)
    if served is not None:
        verb = "serves" if connection.kind == ConnectionKind.ENGINE else "listed at its last test"
        return ModelOptions(served, f"The models {connection.name} {verb}.", served=True)
    catalogued = list(catalog_models_for_kind(kind=connection.kind).values_list("model_id", flat=True))
    why = (
        "did not answer just now"
        if connection.kind == ConnectionKind.ENGINE
        else "has not listed its own: test it on the Connections page"
    )
    return ModelOptions(catalogued, f"The catalogue's models for its kind ({connection.name} {why}).")
