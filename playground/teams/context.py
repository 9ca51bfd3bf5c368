"""The budget banner every page shows to a team whose spend crossed an alert threshold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from playground.accounts.selectors import team_list_for_user
from playground.usage.budgets import budget_month, budget_status, usd_text
from playground.usage.models import BudgetAlert, TeamBudget


@dataclass(frozen=True)
class BudgetBanner:
    team_id: int
    text: str
    exhausted: bool


def budget_banners(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    banners = []
    for team in team_list_for_user(user=user).filter(budget__monthly_limit_usd__isnull=False):
        month = budget_month(team)
        top = (
            BudgetAlert.objects.filter(team=team, month=month)
            .order_by("-threshold")
            .values_list("threshold", flat=True)
            .first()
        )
        if top is None:
            continue
        status = budget_status(team=team)
        limit = TeamBudget.objects.get(team=team).monthly_limit_usd
        assert limit is not None
        banners.append(
            BudgetBanner(
                team_id=team.pk,
                text=(
                    f"{team.name} has spent {usd_text(status.spent)} of its {usd_text(limit)} budget for "
                    f"{month:%B} ({status.percent_used}%; the {top}% alert was reached)."
                ),
                exhausted=top >= 100,
            )
        )
    return {"budget_banners": banners}
