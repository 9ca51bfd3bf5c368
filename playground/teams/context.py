"""The top bar every full page shows: the user's teams and their budget banners.

One context processor, one query (`selectors.topbar_teams`), run only when a template reads
`teams` or `budget_banners`, and not at all for an htmx fragment, which has no top bar (a
boosted link or a history restore is a whole page, and gets it). Views do not build the team
list themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from playground.accounts.models import Team
from playground.accounts.selectors import AnyUser
from playground.teams.selectors import topbar_teams
from playground.usage.budgets import budget_month
from playground.usage.money import money


@dataclass(frozen=True)
class BudgetBanner:
    team_id: int
    text: str
    exhausted: bool


class TopBar:
    """The top bar's figures for one request, read once on first use."""

    def __init__(self, user: AnyUser) -> None:
        self.user = user

    @cached_property
    def teams(self) -> list[Team]:
        return topbar_teams(user=self.user)

    @cached_property
    def budget_banners(self) -> list[BudgetBanner]:
        """A banner for each team with a limit whose spend crossed an alert threshold this month."""
        return [banner for team in self.teams if (banner := _banner(team)) is not None]


def _banner(team: Any) -> BudgetBanner | None:
    """The team's banner this month: once its spend reached an alert threshold, and as soon as it
    reached the limit (also when the limit was lowered under it, before any request failed)."""
    limit: Decimal | None = team.limit_usd
    if limit is None:
        return None
    month = budget_month(team)
    spent: Decimal = (team.ledger_spent or Decimal(0)) if team.ledger_month == month else Decimal(0)
    percent = int(spent * 100 / limit) if limit else 100
    exhausted = spent >= limit
    alert = team.alert_top if team.alert_month == month and percent >= team.alert_top else None
    if not exhausted and alert is None:
        return None
    text = f"{team.name} has spent {money(spent)} of its {money(limit)} budget for {month:%B} ({percent}%"
    text += f"; the {alert}% alert was reached)." if alert is not None else ")."
    if exhausted:
        # The ledger's check is spent + reserved + worst case <= limit: over it, free ones fail too.
        which = "Every request is" if spent > limit else "Requests that cost anything are"
        text += f" {which} refused until the limit is raised or the month ends."
    return BudgetBanner(team_id=team.pk, text=text, exhausted=exhausted)


def topbar(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    htmx = getattr(request, "htmx", None)
    if htmx and not htmx.boosted and not htmx.history_restore_request:
        return {}
    bar = TopBar(user)
    return {
        "teams": SimpleLazyObject(lambda: bar.teams),
        "budget_banners": SimpleLazyObject(lambda: bar.budget_banners),
    }
