"""Alert thresholds: each one a team's spend crosses is recorded, and its managers e-mailed, once a month."""

from __future__ import annotations

import logging
from decimal import Decimal

from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.utils import timezone

from playground.accounts.models import ROLES_THAT_CAN_MANAGE, Membership, Team
from playground.usage.budgets.text import usd_text
from playground.usage.models import BudgetAlert, BudgetLedger, TeamBudget

logger = logging.getLogger(__name__)


def budget_alerts_check(*, ledger_id: int) -> list[int]:
    """Record (and email once) every alert threshold the team's spend crossed this month."""
    ledger = BudgetLedger.objects.select_related("team").get(pk=ledger_id)
    budget = TeamBudget.objects.filter(team_id=ledger.team_id).first()
    if budget is None or not budget.monthly_limit_usd:
        return []
    percent = ledger.spent_usd * 100 / budget.monthly_limit_usd
    crossed = []
    for threshold in sorted(budget.alert_thresholds or []):
        if percent < threshold:
            continue
        try:
            with transaction.atomic():
                alert = BudgetAlert.objects.create(
                    team_id=ledger.team_id, month=ledger.month, threshold=threshold
                )
        except IntegrityError:
            continue  # already raised (and emailed) this month
        crossed.append(threshold)
        _alert_email(alert=alert, team=ledger.team, limit=budget.monthly_limit_usd, spent=ledger.spent_usd)
    return crossed


def _alert_email(*, alert: BudgetAlert, team: Team, limit: Decimal, spent: Decimal) -> None:
    recipients = list(
        Membership.objects.filter(team=team, role__in=ROLES_THAT_CAN_MANAGE)
        .exclude(user__email="")
        .values_list("user__email", flat=True)
    )
    if recipients:
        message = EmailMessage(
            subject=f"{team.name} has used {alert.threshold}% of its monthly budget",
            body=(
                f"{team.name} has spent {usd_text(spent)} of its {usd_text(limit)} budget for "
                f"{alert.month:%B %Y} ({alert.threshold}% alert).\n"
            ),
            to=recipients,
        )
        try:
            message.send()
        except Exception:  # the banner still shows it; the next threshold tries again
            logger.exception("could not email the %s%% budget alert of team %s", alert.threshold, team.pk)
            return
    BudgetAlert.objects.filter(pk=alert.pk).update(emailed_at=timezone.now())
