"""`statements.ledger` holds money exactly as the ORM's conditional UPDATE would, and reads a
ledger with its budget as the ORM reads them."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.db.models import F, Value

from playground.usage.models import BudgetLedger, TeamBudget
from playground.usage.statements.ledger import ledger_hold, ledger_with_budget
from tests.support.actors import Actors
from tests.usage.statements.orm import column_values

pytestmark = pytest.mark.django_db(transaction=False)


def _orm_hold(ledger_id: int, amount: Decimal, limit: Decimal | None) -> bool:
    rows = BudgetLedger.objects.filter(pk=ledger_id)
    if limit is not None:
        rows = rows.filter(spent_usd__lte=Value(limit - amount) - F("reserved_usd"))
    return bool(rows.update(reserved_usd=F("reserved_usd") + amount))


def _state(ledger_id: int) -> dict[str, object]:
    values = column_values(BudgetLedger.objects.get(pk=ledger_id))
    return {name: value for name, value in values.items() if name not in {"id", "month"}}


def test_a_hold_by_hand_holds_or_refuses_what_the_orm_would(actors: Actors) -> None:
    spent = Decimal("1.2345678901")
    ours = BudgetLedger.objects.create(team=actors.team, month=dt.date(2026, 1, 1), spent_usd=spent)
    theirs = BudgetLedger.objects.create(team=actors.team, month=dt.date(2026, 2, 1), spent_usd=spent)
    cases = [
        (Decimal("0.3333333333"), None),  # no limit: always held
        (Decimal("0.5"), Decimal(3)),  # room for it
        (Decimal("0.9320987766"), Decimal(3)),  # exactly the room left (3 - spent - reserved)
        (Decimal("0.0000000001"), Decimal(3)),  # one tenth of a nano-dollar over
        (Decimal(2), Decimal(1)),  # the limit is below what is spent already
    ]
    results = []
    for amount, limit in cases:
        mine = ledger_hold(ours.pk, amount, limit)
        assert mine == _orm_hold(theirs.pk, amount, limit), (amount, limit)
        assert _state(ours.pk) == _state(theirs.pk)
        results.append(mine)
    assert results == [True, True, True, False, False]


def test_a_ledger_read_with_its_budget_by_hand_equals_what_the_orm_reads(actors: Actors) -> None:
    ledger = BudgetLedger.objects.create(
        team=actors.team, month=dt.date(2026, 3, 1), spent_usd=Decimal("7.0000000003")
    )
    assert ledger_with_budget(ledger.pk) == (
        actors.team.pk,
        dt.date(2026, 3, 1),
        Decimal("7.0000000003"),
        None,
        None,
    )

    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal("9.99"), alert_thresholds=[50, 90])
    loaded = BudgetLedger.objects.get(pk=ledger.pk)
    budget = TeamBudget.objects.get(team=actors.team)
    expected = (
        loaded.team_id,
        loaded.month,
        loaded.spent_usd,
        budget.monthly_limit_usd,
        budget.alert_thresholds,
    )
    assert ledger_with_budget(ledger.pk) == expected
