"""Budgets: the team's monthly limit and alerts, unpriced requests, and each member's limit."""

from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import transaction

from playground.accounts.models import AuditAction, Membership, Team
from playground.teams.services.audit import audit
from playground.teams.services.role_checks import require_manager, require_owner
from playground.usage.models import DEFAULT_ALERT_THRESHOLDS, TeamBudget


def team_budget_update(
    *, actor: Membership, monthly_limit_usd: Decimal | None, alert_thresholds: list[int], time_zone: str
) -> TeamBudget:
    require_manager(actor)
    with transaction.atomic():
        budget, _ = TeamBudget.objects.select_for_update().get_or_create(team=actor.team)
        before = (budget.monthly_limit_usd, list(budget.alert_thresholds or []), actor.team.time_zone)
        budget.monthly_limit_usd = monthly_limit_usd
        budget.alert_thresholds = sorted(set(alert_thresholds))
        budget.full_clean(exclude=["team"])
        budget.save()
        Team.objects.filter(pk=actor.team_id).update(time_zone=time_zone)
        actor.team.time_zone = time_zone
        audit(
            actor=actor.user,
            team=actor.team,
            action=AuditAction.BUDGET_CHANGED,
            target=actor.team.name,
            previous={"limit": _money(before[0]), "thresholds": before[1], "time_zone": before[2]},
            limit=_money(monthly_limit_usd),
            thresholds=budget.alert_thresholds,
            time_zone=time_zone,
        )
    return budget


def _budget_locked(team: Team) -> TeamBudget:
    """The team's budget row, locked; one made here alerts at the default thresholds (the
    budget form sets its own)."""
    budget, _ = TeamBudget.objects.select_for_update().get_or_create(
        team=team, defaults={"alert_thresholds": list(DEFAULT_ALERT_THRESHOLDS)}
    )
    return budget


def team_unpriced_update(*, actor: Membership, allow: bool) -> TeamBudget:
    """Owners only: whether requests for models without a price card that day may be sent
    while a budget applies (they count nothing against it). Audited."""
    require_owner(actor)
    with transaction.atomic():
        budget = _budget_locked(actor.team)
        if budget.allow_unpriced != allow:
            budget.allow_unpriced = allow
            budget.save(update_fields=["allow_unpriced", "updated_at"])
            audit(
                actor=actor.user,
                team=actor.team,
                action=AuditAction.UNPRICED_REQUESTS_CHANGED,
                target=actor.team.name,
                previous=not allow,
                allowed=allow,
            )
    return budget


def member_budget_update(
    *, actor: Membership, membership_id: int, monthly_budget_usd: Decimal | None
) -> Membership:
    require_manager(actor)
    with transaction.atomic():
        target = (
            Membership.objects.select_related("user").filter(team_id=actor.team_id, pk=membership_id).first()
        )
        if target is None:
            raise ValidationError("That person is not a member of this team.")
        previous = target.monthly_budget_usd
        target.monthly_budget_usd = monthly_budget_usd
        target.save(update_fields=["monthly_budget_usd"])
        audit(
            actor=actor.user,
            team=actor.team,
            action=AuditAction.MEMBER_BUDGET_CHANGED,
            target=target.user.get_username(),
            previous=_money(previous),
            limit=_money(monthly_budget_usd),
        )
    return target


def _money(value: Decimal | None) -> str | None:
    return None if value is None else f"{value:.2f}"
