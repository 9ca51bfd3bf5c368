"""Each API key's spend this budget month: its own ledger where it has one, else its records."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from playground.usage.api_keys import api_key_issue
from playground.usage.budgets import budget_month, key_spend, member_spend
from playground.usage.models import BudgetLedger, UsageRecord, UsageStatus
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db


def spend(actors: Actors, *, key_id: int | None, user_id: int | None, cost: str, days_ago: int = 0) -> None:
    record = UsageRecord.objects.create(
        team=actors.team,
        api_key_id=key_id,
        user_id=user_id,
        model_id="m",
        status=UsageStatus.OK,
        total_cost=Decimal(cost),
    )
    UsageRecord.objects.filter(pk=record.pk).update(created_at=timezone.now() - dt.timedelta(days=days_ago))


def test_a_keys_spend_is_the_sum_of_its_records_this_month_until_it_has_a_ledger(actors: Actors) -> None:
    first, _ = api_key_issue(team_id=actors.team.pk, name="a", connection_id=None, created_by_id=None)
    second, _ = api_key_issue(team_id=actors.team.pk, name="b", connection_id=None, created_by_id=None)
    month = budget_month(actors.team)
    spend(actors, key_id=first.pk, user_id=actors.owner.pk, cost="0.25")
    spend(actors, key_id=first.pk, user_id=actors.owner.pk, cost="0.50")
    spend(actors, key_id=first.pk, user_id=actors.owner.pk, cost="9", days_ago=40)  # an earlier month
    spend(actors, key_id=None, user_id=actors.owner.pk, cost="1")  # the playground, not a key
    BudgetLedger.objects.create(team=actors.team, month=month, api_key=second, spent_usd=Decimal("2.5"))

    assert key_spend(team=actors.team, month=month) == {first.pk: Decimal("0.75"), second.pk: Decimal("2.5")}
    assert member_spend(team=actors.team, month=month) == {actors.owner.pk: Decimal("1.75")}, (
        "a key's ledger is not a member's"
    )
