"""The budget ledgers: limits, what each month spent and holds, and the alerts sent
(their behaviour is in `playground.usage.budgets`).
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from playground.accounts.models import Team
from playground.usage.models.api_keys import ApiKey

# --- budgets -----------------------------------------------------------------------------------
# Made in `accounts` and moved here, where their behaviour is (`playground.usage.budgets`),
# without copying a row: each keeps its table (`db_table`), and the move only changed the
# migration state (usage 0011, accounts 0005).

DEFAULT_ALERT_THRESHOLDS = [50, 80, 100]


def thresholds_validate(value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(v, int) and 1 <= v <= 1000 for v in value):
        raise ValidationError("Alert thresholds are whole percentages between 1 and 1000.")


class TeamBudget(models.Model):
    """A team's monthly budget; no row (or a blank limit) means no limit."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="budget")
    monthly_limit_usd = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    alert_thresholds = models.JSONField(default=list, validators=[thresholds_validate])
    # Owners only: send requests for models with no price card that day although a budget
    # applies (they are recorded unpriced and count nothing). Off: such requests are refused.
    allow_unpriced = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "accounts_teambudget"

    def __str__(self) -> str:
        return f"{self.team}: {self.monthly_limit_usd or 'no'} USD a month"


class BudgetLedger(models.Model):
    """What a team (user and key NULL), one member or one API key spent and has reserved in one
    budget month.

    The row every admission updates with one conditional UPDATE (`playground.usage.budgets.ledger`):
    `spent + reserved + cost <= limit` is checked and `reserved` raised in the same statement,
    so concurrent requests cannot all pass a check made before any of them is counted.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_ledgers")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE)
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    month = models.DateField(help_text="The first day of the month, in the team's time zone")
    spent_usd = models.DecimalField(max_digits=18, decimal_places=10, default=Decimal(0))
    reserved_usd = models.DecimalField(max_digits=18, decimal_places=10, default=Decimal(0))

    class Meta:
        db_table = "accounts_budgetledger"
        constraints = [
            models.UniqueConstraint(
                fields=["team", "month"],
                condition=models.Q(user__isnull=True, api_key__isnull=True),
                name="one_team_ledger_per_month",
            ),
            models.UniqueConstraint(
                fields=["team", "month", "user"],
                condition=models.Q(user__isnull=False),
                name="one_member_ledger_per_month",
            ),
            models.UniqueConstraint(
                fields=["team", "month", "api_key"],
                condition=models.Q(api_key__isnull=False),
                name="one_key_ledger_per_month",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team} {self.month:%Y-%m} {self.user or 'team'}"


class BudgetReservation(models.Model):
    """One request's worst-case cost, held on the ledgers until its usage record is written.

    Settled (once: a conditional UPDATE on `settled_at`) by the metered call's reconcile step,
    or released by the sweep when a process died between reserving and reconciling.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_reservations")
    team_ledger = models.ForeignKey(BudgetLedger, on_delete=models.CASCADE, related_name="+")
    member_ledger = models.ForeignKey(
        BudgetLedger, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    key_ledger = models.ForeignKey(
        BudgetLedger, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    amount_usd = models.DecimalField(max_digits=18, decimal_places=10)
    actual_usd = models.DecimalField(max_digits=18, decimal_places=10, null=True, blank=True)
    label = models.CharField(max_length=120, blank=True, help_text="What reserved it (path, source)")
    created_at = models.DateTimeField(auto_now_add=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "accounts_budgetreservation"
        indexes = [models.Index(fields=["team", "settled_at", "created_at"])]

    def __str__(self) -> str:
        return f"{self.amount_usd} USD for {self.label or 'a request'}"


class BudgetAlert(models.Model):
    """A threshold a team crossed in a month: the banner, and the email sent once."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_alerts")
    month = models.DateField()
    threshold = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    emailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "accounts_budgetalert"
        constraints = [
            models.UniqueConstraint(
                fields=["team", "month", "threshold"], name="one_alert_per_threshold_month"
            )
        ]

    def __str__(self) -> str:
        return f"{self.team} {self.month:%Y-%m} {self.threshold}%"
