"""The budget share a `budget_used_above` rule compares with: the tightest of the team's, the
key's and the member's monthly budgets, spent or held so far this month."""

from __future__ import annotations

from decimal import Decimal

import pytest

from playground.routing.selectors import routing_budget_used
from playground.usage.api_keys import api_key_issue
from playground.usage.budgets import budget_month
from playground.usage.models import BudgetLedger, TeamBudget
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db


def test_no_limit_anywhere_means_no_share(actors: Actors) -> None:
    key, _ = api_key_issue(team_id=actors.team.pk, name="k", connection_id=None, created_by_id=None)
    assert (
        routing_budget_used(team_id=actors.team.pk, key_id=key.pk, key_limit=None, user_id=actors.teammate.pk)
        is None
    )


def test_the_tightest_of_the_team_key_and_member_budgets_counts_with_what_is_held(actors: Actors) -> None:
    key, _ = api_key_issue(
        team_id=actors.team.pk, name="k", connection_id=None, created_by_id=actors.teammate.pk
    )
    month = budget_month(actors.team)
    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal("100"))
    BudgetLedger.objects.create(
        team=actors.team, month=month, spent_usd=Decimal("40"), reserved_usd=Decimal("5")
    )
    BudgetLedger.objects.create(team=actors.team, month=month, api_key=key, spent_usd=Decimal("3"))
    BudgetLedger.objects.create(team=actors.team, month=month, user=actors.teammate, spent_usd=Decimal("9"))

    def used(*, key_limit: str | None, member_limit: str | None) -> float | None:
        membership = actors.membership(actors.teammate)
        membership.monthly_budget_usd = Decimal(member_limit) if member_limit else None
        membership.save()
        return routing_budget_used(
            team_id=actors.team.pk,
            key_id=key.pk,
            key_limit=Decimal(key_limit) if key_limit else None,
            user_id=actors.teammate.pk,
        )

    assert used(key_limit=None, member_limit=None) == pytest.approx(0.45), "the team's, with what is held"
    assert used(key_limit="5", member_limit=None) == pytest.approx(0.6), "the key's is tighter"
    assert used(key_limit="5", member_limit="10") == pytest.approx(0.9), "the member's is tightest"
    assert routing_budget_used(
        team_id=actors.team.pk, key_id=key.pk, key_limit=None, user_id=None
    ) == pytest.approx(0.45), "no member: the member's budget is not read"
