"""`statements.admission` reads a team and its limits as the ORM reads them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from playground.accounts.models import Membership, Team
from playground.usage.models import TeamBudget
from playground.usage.statements.admission import team_with_limits
from tests.support.actors import Actors
from tests.usage.statements.orm import column_values

pytestmark = pytest.mark.django_db(transaction=False)


def _by_the_orm(team_id: int, user_id: int | None) -> tuple[object, ...]:
    budget = TeamBudget.objects.filter(team_id=team_id).first()
    member = Membership.objects.filter(team_id=team_id, user_id=user_id).first() if user_id else None
    return (
        column_values(Team.objects.get(pk=team_id)),
        budget.monthly_limit_usd if budget else None,
        bool(budget and budget.allow_unpriced),
        member.monthly_budget_usd if member else None,
    )


def _by_hand(team_id: int, user_id: int | None) -> tuple[object, ...]:
    team, limit, allow_unpriced, member_limit = team_with_limits(team_id=team_id, user_id=user_id)
    return column_values(team), limit, allow_unpriced, member_limit


def test_the_team_and_its_limits_read_by_hand_equal_what_the_orm_reads(actors: Actors) -> None:
    team, member = actors.team.pk, actors.teammate.pk
    assert _by_hand(team, member) == _by_the_orm(team, member)  # no budget, no member limit yet

    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal("12.34"), allow_unpriced=True)
    Membership.objects.filter(team=actors.team, user=actors.teammate).update(
        monthly_budget_usd=Decimal("0.5")
    )
    for user_id in (member, actors.owner.pk, actors.outsider.pk, None):
        assert _by_hand(team, user_id) == _by_the_orm(team, user_id)
    assert _by_hand(team, member)[1:] == (Decimal("12.34"), True, Decimal("0.50"))

    with pytest.raises(Team.DoesNotExist):
        team_with_limits(team_id=10**9, user_id=None)
