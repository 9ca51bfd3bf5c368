"""`statements.settlement` claims, prices and moves what the ORM would claim, write and move."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.db.models import F
from django.utils import timezone

from playground.usage.models import BudgetLedger, BudgetReservation
from playground.usage.statements.settlement import ledgers_move, reservations_claim
from tests.support.actors import Actors
from tests.usage.statements.orm import column_values

pytestmark = pytest.mark.django_db(transaction=False)


def _ledger(actors: Actors, month: int, **fields: object) -> BudgetLedger:
    return BudgetLedger.objects.create(team=actors.team, month=dt.date(2026, month, 1), **fields)


def _reservation(actors: Actors, ledger: BudgetLedger, amount: str, **fields: object) -> BudgetReservation:
    return BudgetReservation.objects.create(
        team=actors.team, team_ledger=ledger, amount_usd=Decimal(amount), label="test", **fields
    )


def _without(values: dict[str, object], *names: str) -> dict[str, object]:
    return {name: value for name, value in values.items() if name not in names}


def test_a_claim_returns_and_marks_what_the_orm_reads_and_skips_the_settled(actors: Actors) -> None:
    team = _ledger(actors, 1)
    member = BudgetLedger.objects.create(team=actors.team, user=actors.teammate, month=dt.date(2026, 1, 1))
    first = _reservation(actors, team, "0.1234567891", member_ledger=member)
    second = _reservation(actors, team, "2")
    settled = _reservation(actors, team, "3", settled_at=timezone.now())
    expected = [
        (row.pk, row.amount_usd, row.team_ledger_id, row.member_ledger_id, row.key_ledger_id)
        for row in BudgetReservation.objects.filter(pk__in=[first.pk, second.pk]).order_by("pk")
    ]
    now = timezone.now()
    actuals = {first.pk: Decimal("0.0000012345"), second.pk: Decimal(3), settled.pk: Decimal(1)}

    claimed = reservations_claim(list(actuals.items()), now=now)

    assert sorted(claimed) == expected
    assert list(
        BudgetReservation.objects.filter(pk__in=[first.pk, second.pk]).values_list("settled_at", flat=True)
    ) == [now, now]
    assert reservations_claim(list(actuals.items()), now=now) == []  # once only
    assert BudgetReservation.objects.get(pk=settled.pk).actual_usd is None  # settled by someone else


def test_actual_costs_and_ledger_moves_write_what_the_orm_writes(actors: Actors) -> None:
    ledger = _ledger(actors, 1)
    ours, theirs = _reservation(actors, ledger, "1"), _reservation(actors, ledger, "1")
    actual, now = Decimal("0.0000012345"), timezone.now()
    reservations_claim([(ours.pk, actual)], now=now)
    BudgetReservation.objects.filter(pk=theirs.pk).update(actual_usd=actual, settled_at=now)
    read = BudgetReservation.objects.get
    assert _without(column_values(read(pk=ours.pk)), "id", "created_at") == _without(
        column_values(read(pk=theirs.pk)), "id", "created_at"
    )

    start = {"spent_usd": Decimal("1.5"), "reserved_usd": Decimal("2.0000000001")}
    mine, orm = _ledger(actors, 2, **start), _ledger(actors, 3, **start)
    also_mine = _ledger(actors, 4, **start)  # moved in the same call: the statements go at once
    for held, spent in ((Decimal("0.0000000001"), Decimal("0.3333333333")), (Decimal(2), Decimal("0.25"))):
        ledgers_move([(mine.pk, held, spent), (also_mine.pk, held, spent)])
        BudgetLedger.objects.filter(pk=orm.pk).update(
            reserved_usd=F("reserved_usd") - held, spent_usd=F("spent_usd") + spent
        )
        for moved in (mine, also_mine):
            assert _without(column_values(BudgetLedger.objects.get(pk=moved.pk)), "id", "month") == _without(
                column_values(BudgetLedger.objects.get(pk=orm.pk)), "id", "month"
            )
    assert BudgetLedger.objects.get(pk=mine.pk).reserved_usd == Decimal(0)
