"""Reads of the team pages, scoped to one team the caller belongs to."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import F, OuterRef, QuerySet, Subquery
from django.utils import timezone

from playground.accounts.chain import ChainStatus, chain_verify
from playground.accounts.models import AuditEvent, Invitation, Membership, Team
from playground.accounts.selectors import AnyUser, team_list_for_user
from playground.catalog.models import CatalogModel
from playground.catalog.selectors import price_card_for, price_card_label
from playground.providers.models import ProviderConnection
from playground.routing.chain import DECISION_KINDS
from playground.usage.budgets import BudgetStatus, member_spend
from playground.usage.models import DEFAULT_ALERT_THRESHOLDS, BudgetAlert, BudgetLedger, RoutingSealChain
from playground.usage.money import money

AUDIT_ROWS = 500


def membership_for(*, user: AnyUser, team_id: int) -> Membership | None:
    if not user.is_authenticated:
        return None
    return Membership.objects.select_related("team", "user").filter(user_id=user.pk, team_id=team_id).first()


def topbar_teams(*, user: AnyUser) -> list[Team]:
    """The user's teams for the top bar, in one query, each with what its budget banner needs:
    `limit_usd`; the month and spend of its latest team ledger (`ledger_month`, `ledger_spent`);
    the month and threshold of its latest alert (`alert_month`, `alert_top`).

    The latest month's, not the current one: the current month depends on each team's time
    zone, which the caller compares in Python (`budget_month`)."""
    alerts = BudgetAlert.objects.filter(team=OuterRef("pk")).order_by("-month", "-threshold")
    ledgers = BudgetLedger.objects.filter(
        team=OuterRef("pk"), user__isnull=True, api_key__isnull=True
    ).order_by("-month")
    return list(
        team_list_for_user(user=user).annotate(
            limit_usd=F("budget__monthly_limit_usd"),
            alert_month=Subquery(alerts.values("month")[:1]),
            alert_top=Subquery(alerts.values("threshold")[:1]),
            ledger_month=Subquery(ledgers.values("month")[:1]),
            ledger_spent=Subquery(ledgers.values("spent_usd")[:1]),
        )
    )


def connection_list(*, team_id: int) -> QuerySet[ProviderConnection]:
    return ProviderConnection.objects.filter(team_id=team_id).order_by("-is_default", "name")


def connection_for(*, team_id: int, connection_id: int) -> ProviderConnection | None:
    return ProviderConnection.objects.filter(team_id=team_id, pk=connection_id).first()


def team_budget_settings(*, team: Team) -> dict[str, Any]:
    """The budget form's values: the team's budget, or no limit and the default thresholds."""
    budget = getattr(team, "budget", None)
    thresholds = budget.alert_thresholds if budget else DEFAULT_ALERT_THRESHOLDS
    return {
        "monthly_limit_usd": budget.monthly_limit_usd if budget else None,
        "alert_thresholds": ", ".join(str(value) for value in thresholds),
        "time_zone": team.time_zone,
    }


def member_rows(*, team: Team) -> QuerySet[Membership]:
    return Membership.objects.filter(team=team).select_related("user").order_by("role", "user__username")


def invitations_pending(*, team: Team) -> list[Invitation]:
    return list(
        Invitation.objects.filter(
            team=team, accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
        ).select_related("created_by")
    )


@dataclass(frozen=True)
class CatalogueRow:
    model: CatalogModel
    price_label: str
    prices: str
    is_override: bool
    retirement: str = ""  # "retires on …" or "retired on …; served as … since"


def catalogue_rows(*, team_id: int, today: dt.date) -> list[CatalogueRow]:
    """Each model with the card that prices this team's requests today, named as the records it
    prices name it (`price_card_label`)."""
    rows = []
    for model in CatalogModel.objects.select_related("alias_of").order_by("display_name"):
        retirement = model.retirement_text(today)
        card = price_card_for(model_id=model.model_id, day=today, team_id=team_id)
        if card is None:
            rows.append(CatalogueRow(model, "No price card for today", "unpriced", False, retirement))
            continue
        cached = (
            f" · ${card.cached_input_per_m.normalize():f} cached"
            if card.cached_input_per_m is not None
            else ""
        )
        written = (
            f" · ${card.cache_write_input_per_m.normalize():f} cache write"
            if card.cache_write_input_per_m is not None
            else ""
        )
        output = f"${card.output_per_m.normalize():f} out"
        prices = f"${card.input_per_m.normalize():f} in{cached}{written} · {output} per M tokens"
        label = price_card_label(model_id=model.model_id, card=card, day=today)
        rows.append(CatalogueRow(model, label, prices, card.is_override, retirement))
    return rows


@dataclass(frozen=True)
class BudgetView:
    month: str
    limit: str
    spent: str
    reserved: str
    remaining: str
    forecast: str
    percent: int | None
    over_forecast: bool
    thresholds: str
    crossed: list[int]


def budget_view(status: BudgetStatus) -> BudgetView:
    remaining = status.remaining
    return BudgetView(
        month=status.month.strftime("%B %Y"),
        limit=money(status.limit) if status.limit is not None else "No limit",
        spent=money(status.spent),
        reserved=money(status.reserved),
        remaining=money(remaining) if remaining is not None else "—",
        forecast=money(status.forecast),
        percent=min(status.percent_used, 100) if status.percent_used is not None else None,
        over_forecast=status.limit is not None and status.forecast > status.limit,
        thresholds=", ".join(f"{value}%" for value in status.thresholds) or "none",
        crossed=status.crossed,
    )


@dataclass(frozen=True)
class MemberBudgetRow:
    membership: Membership
    spent: str
    budget: Decimal | None


def member_budget_rows(*, team: Team, month: dt.date) -> list[MemberBudgetRow]:
    spend = member_spend(team=team, month=month)
    return [
        MemberBudgetRow(
            membership, money(spend.get(membership.user_id, Decimal(0))), membership.monthly_budget_usd
        )
        for membership in member_rows(team=team)
    ]


@dataclass(frozen=True)
class AuditRow:
    event: AuditEvent
    details: list[str]


def audit_rows(*, team: Team) -> list[AuditRow]:
    events = AuditEvent.objects.filter(team=team).select_related("actor")[:AUDIT_ROWS]
    return [AuditRow(event, audit_detail_lines(event.detail)) for event in events]


def decision_chain_status(*, team: Team) -> ChainStatus:
    """Whether the team's audit events and routing policy versions are as they were written."""
    return chain_verify(team_id=team.pk, kinds=DECISION_KINDS)


def routing_seal_head(*, team: Team) -> RoutingSealChain | None:
    """How far the team's routing decisions are sealed (`usage.routing_seals`); None: never. The
    page shows this row only: checking every decision is `manage.py verify_routing_chain`'s work."""
    return RoutingSealChain.objects.filter(team_id=team.pk).first()


# Names of detail keys where the key itself does not read well.
AUDIT_LABELS = {
    "base_url": "base URL",
    "input_per_m": "input $/M",
    "cached_input_per_m": "cached input $/M",
    "cache_write_input_per_m": "cache write $/M",
    "output_per_m": "output $/M",
    "limit": "limit (USD)",
    "monthly_budget": "monthly budget (USD)",
}


def audit_detail_lines(detail: dict[str, Any]) -> list[str]:
    """An audit event's detail as lines a person reads: "role: member → admin".

    `previous` holds what a change replaced: a dict of the changed keys' old values, or (for
    a change of one value) the old value of the one other key. Keys come in alphabetical
    order: PostgreSQL's jsonb keeps no order of its own.
    """
    current = {key: value for key, value in detail.items() if key != "previous"}
    previous = detail.get("previous")
    if "previous" in detail and not isinstance(previous, dict):
        if len(current) == 1:
            previous = {next(iter(current)): previous}
        else:
            current["previous"] = previous
            previous = {}
    previous = previous or {}
    lines = []
    for key, value in sorted(current.items()):
        label = AUDIT_LABELS.get(key, key.replace("_", " "))
        if key in previous and previous[key] != value:
            lines.append(f"{label}: {_audit_value(previous[key])} → {_audit_value(value)}")
        else:
            lines.append(f"{label}: {_audit_value(value)}")
    return lines


def _audit_value(value: object) -> str:
    if value is None or value == "" or value == []:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(_audit_value(item) for item in value)
    if isinstance(value, dict):
        return "; ".join(f"{key.replace('_', ' ')} {_audit_value(item)}" for key, item in value.items())
    return str(value)
