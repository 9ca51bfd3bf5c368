"""This month's budget figures for the budgets page and the banner (reads only)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Q, Sum
from django.utils import timezone

from playground.accounts.models import Team
from playground.usage.budgets.months import budget_month, month_bounds
from playground.usage.models import BudgetAlert, BudgetLedger, TeamBudget, UsageRecord
from playground.usage.money import money
from playground.usage.pricing import ZERO
from playground.usage.statements.admission import team_with_limits


@dataclass(frozen=True)
class BudgetStatus:
    month: dt.date
    limit: Decimal | None
    spent: Decimal
    reserved: Decimal
    forecast: Decimal
    thresholds: list[int]
    crossed: list[int]

    @property
    def remaining(self) -> Decimal | None:
        return None if self.limit is None else max(ZERO, self.limit - self.spent - self.reserved)

    @property
    def percent_used(self) -> int | None:
        return None if not self.limit else int(self.spent * 100 / self.limit)


def budget_status(*, team: Team, now: dt.datetime | None = None) -> BudgetStatus:
    """This month's figures for the budgets page and the banner (reads only)."""
    now = now or timezone.now()
    month = budget_month(team, now=now)
    ledger = BudgetLedger.objects.filter(
        team=team, user__isnull=True, api_key__isnull=True, month=month
    ).first()
    if ledger is not None:
        spent, reserved = ledger.spent_usd, ledger.reserved_usd
    else:
        start, end = month_bounds(team, month)
        records = UsageRecord.objects.filter(team=team, created_at__gte=start, created_at__lt=end)
        spent, reserved = records.aggregate(total=Sum("total_cost"))["total"] or ZERO, ZERO
    budget = TeamBudget.objects.filter(team=team).first()
    return BudgetStatus(
        month=month,
        limit=budget.monthly_limit_usd if budget else None,
        spent=spent,
        reserved=reserved,
        forecast=month_end_forecast(team=team, spent=spent, now=now),
        thresholds=list(budget.alert_thresholds) if budget else [],
        crossed=list(
            BudgetAlert.objects.filter(team=team, month=month)
            .order_by("threshold")
            .values_list("threshold", flat=True)
        ),
    )


@dataclass(frozen=True)
class TeamBudgetUse:
    team_id: int
    limit: Decimal
    spent: Decimal


def team_budgets_used(*, now: dt.datetime | None = None) -> list[TeamBudgetUse]:
    """Every team with a monthly limit and what its ledger says it spent this month (each in its
    own time zone), for the metrics' scrape: two queries, whatever the number of teams. A team
    whose month has no ledger yet has held nothing through an admission, so it spent 0 here."""
    now = now or timezone.now()
    budgets = list(
        TeamBudget.objects.filter(monthly_limit_usd__isnull=False)
        .select_related("team")
        .only("team_id", "monthly_limit_usd", "team__time_zone")
    )
    months = {budget.team_id: budget_month(budget.team, now=now) for budget in budgets}
    spent = {
        (team_id, month): amount
        for team_id, month, amount in BudgetLedger.objects.filter(
            user__isnull=True, api_key__isnull=True, team_id__in=months, month__in=set(months.values())
        ).values_list("team_id", "month", "spent_usd")
    }
    return [
        TeamBudgetUse(
            team_id=budget.team_id,
            limit=budget.monthly_limit_usd,
            spent=spent.get((budget.team_id, months[budget.team_id]), ZERO),
        )
        for budget in budgets
        if budget.monthly_limit_usd is not None
    ]


@dataclass(frozen=True)
class Headroom:
    """What is left this month of the tightest budget a member's requests are held on."""

    whose: str  # "the team's" or "your", as the admission's refusal says it
    limit: Decimal
    spent: Decimal
    reserved: Decimal

    @property
    def remaining(self) -> Decimal:
        return max(ZERO, self.limit - self.spent - self.reserved)

    def refusal(self, amount: Decimal) -> str | None:
        """What the admission would answer a request holding `amount` now (its own conditional
        UPDATE decides; this reads), or None when it fits."""
        if self.spent + self.reserved + amount <= self.limit:
            return None
        return (
            f"This request could cost up to {money(amount)}; {money(self.remaining)} of {self.whose} "
            f"{money(self.limit)} budget remains this month."
        )


def budget_headroom(*, team_id: int, user_id: int | None) -> Headroom | None:
    """The team's or the member's budget this month, whichever has less left (None: neither has a
    limit), for pages that say before sending whether a request would be refused."""
    team, team_limit, _, member_limit = team_with_limits(team_id=team_id, user_id=user_id)
    if team_limit is None and member_limit is None:
        return None
    ledgers = BudgetLedger.objects.filter(team_id=team_id, month=budget_month(team), api_key__isnull=True)
    owners = Q(user__isnull=True) | Q(user_id=user_id) if user_id is not None else Q(user__isnull=True)
    rows = ledgers.filter(owners).values_list("user_id", "spent_usd", "reserved_usd")
    held: dict[int | None, tuple[Decimal, Decimal]] = {
        owner: (spent, reserved) for owner, spent, reserved in rows
    }
    budgets = [(None, team_limit, "the team's"), (user_id, member_limit, "your")]
    rooms = [
        Headroom(whose, limit, *held.get(owner, (ZERO, ZERO)))
        for owner, limit, whose in budgets
        if limit is not None
    ]
    return min(rooms, key=lambda room: room.limit - room.spent - room.reserved)


def month_end_forecast(*, team: Team, spent: Decimal, now: dt.datetime) -> Decimal:
    """Spend so far scaled to the whole month at the same rate (time elapsed in the team's zone)."""
    start, end = month_bounds(team, budget_month(team, now=now))
    elapsed = (now - start).total_seconds()
    if elapsed <= 0:
        return spent
    return spent * Decimal((end - start).total_seconds()) / Decimal(elapsed)


def member_spend(*, team: Team, month: dt.date) -> dict[int, Decimal]:
    """Each member's spend in `month` (ledgers where they exist, else their records)."""
    return _spend_by(team=team, month=month, owner="user")


def key_spend(*, team: Team, month: dt.date) -> dict[int, Decimal]:
    """Each API key's spend in `month` (its own ledger where it exists, else its records)."""
    return _spend_by(team=team, month=month, owner="api_key")


def _spend_by(*, team: Team, month: dt.date, owner: str) -> dict[int, Decimal]:
    """Spend in `month` by `owner` ("user" or "api_key"), keyed by its id: the records summed,
    then the owner's ledger where one exists (it also holds what the records predating it cost)."""
    start, end = month_bounds(team, month)
    column = f"{owner}_id"
    rows = (
        UsageRecord.objects.filter(
            team=team, created_at__gte=start, created_at__lt=end, **{f"{owner}__isnull": False}
        )
        .values(column)
        .annotate(total=Sum("total_cost"))
    )
    spend = {row[column]: row["total"] or ZERO for row in rows}
    for ledger_owner, spent in BudgetLedger.objects.filter(
        team=team, month=month, **{f"{owner}__isnull": False}
    ).values_list(column, "spent_usd"):
        spend[ledger_owner] = spent
    return spend
