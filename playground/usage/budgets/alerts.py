"""Alert thresholds: each one a team's spend crosses is recorded, and its managers e-mailed, once a month.

Recording happens in the reconcile step of a request; the e-mail does not: it waits for the
transaction that recorded the alert to commit, then goes to a Celery task
(`playground.usage.tasks.budget_alert_email`), so a slow or failing mail server never holds up
or fails the request whose cost crossed the threshold.
"""

from __future__ import annotations

import logging
from functools import partial

from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.utils import timezone

from playground.accounts.models import ROLES_THAT_CAN_MANAGE, Membership
from playground.usage.models import BudgetAlert, BudgetLedger, TeamBudget
from playground.usage.money import money
from playground.usage.statements.ledger import ledger_with_budget

logger = logging.getLogger(__name__)


def budget_alerts_check(*, ledger_id: int) -> list[int]:
    """Record every alert threshold the team's spend crossed this month; e-mail each new one once
    the transaction commits."""
    team_id, month, spent, limit, thresholds = ledger_with_budget(ledger_id)
    if not limit:
        return []
    percent = spent * 100 / limit
    reached = sorted(threshold for threshold in thresholds or [] if percent >= threshold)
    if not reached:
        return []
    raised = set(BudgetAlert.objects.filter(team_id=team_id, month=month).values_list("threshold", flat=True))
    crossed = []
    for threshold in reached:
        if threshold in raised:
            continue
        try:
            with transaction.atomic():
                alert = BudgetAlert.objects.create(team_id=team_id, month=month, threshold=threshold)
        except IntegrityError:
            continue  # already raised (and emailed) this month
        crossed.append(threshold)
        # robust: a broker that cannot take the task is logged, never raised into the request
        transaction.on_commit(partial(_alert_email_enqueue, alert.pk), robust=True)
    return crossed


def _alert_email_enqueue(alert_id: int) -> None:
    from playground.usage.tasks import budget_alert_email  # tasks import services, not the other way at load

    budget_alert_email.delay(alert_id)


def budget_alert_email_send(*, alert_id: int) -> bool:
    """E-mail a recorded alert to the team's owners and admins, at most once; whether it was sent.

    The alert is claimed (`emailed_at` set) before sending, so a task delivered twice cannot
    send it twice. A send that fails gives the claim back and is not retried: the banner still
    shows the alert, and the next threshold tries again.
    """
    if not BudgetAlert.objects.filter(pk=alert_id, emailed_at__isnull=True).update(emailed_at=timezone.now()):
        return False
    alert = BudgetAlert.objects.select_related("team").get(pk=alert_id)
    team = alert.team
    limit = TeamBudget.objects.filter(team=team).values_list("monthly_limit_usd", flat=True).first()
    spent = (
        BudgetLedger.objects.filter(team=team, user__isnull=True, api_key__isnull=True, month=alert.month)
        .values_list("spent_usd", flat=True)
        .first()
    )
    recipients = list(
        Membership.objects.filter(team=team, role__in=ROLES_THAT_CAN_MANAGE)
        .exclude(user__email="")
        .values_list("user__email", flat=True)
    )
    if not recipients or limit is None or spent is None:
        return False  # nobody to tell, or the budget is gone: nothing more to say
    message = EmailMessage(
        subject=f"{team.name} has used {alert.threshold}% of its monthly budget",
        body=(
            f"{team.name} has spent {money(spent)} of its {money(limit)} budget for "
            f"{alert.month:%B %Y} ({alert.threshold}% alert).\n"
        ),
        to=recipients,
    )
    try:
        message.send()
    except Exception:  # the banner still shows it; the next threshold tries again
        logger.exception("could not email the %s%% budget alert of team %s", alert.threshold, team.pk)
        BudgetAlert.objects.filter(pk=alert_id).update(emailed_at=None)
        return False
    return True
