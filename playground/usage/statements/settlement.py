"""Settlement's statements: reservations claimed once, their actual cost written, the ledgers moved.

A settlement claims its reservations and writes their actual costs in one `UPDATE ... SET
actual = CASE id WHEN ... END WHERE settled_at IS NULL RETURNING ...` (a reservation the sweep
or another call settled meanwhile is skipped, never counted twice), then moves each ledger once
by the sum of its reservations (`budgets.settlement.budget_settle_many`), all the moves sent at
once (`raw_sql.execute_in_order`).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django.db import connection

from playground.usage.models import BudgetLedger, BudgetReservation
from playground.usage.statements import raw_sql


def reservations_claim(actuals: Sequence[tuple[int, Decimal]], *, now: dt.datetime) -> list[tuple[Any, ...]]:
    """Mark unsettled reservations among `actuals` (id, actual cost) settled, each with its actual
    cost; (id, amount, team ledger, member ledger, key ledger) of each this call marked."""
    if not actuals:
        return []
    model = BudgetReservation
    params = [raw_sql.db_value(model, "settled_at", now)]
    for reservation_id, actual in actuals:
        params += [reservation_id, raw_sql.db_value(model, "actual_usd", actual)]
    with connection.cursor() as cursor:
        cursor.execute(
            _claim_sql(connection.vendor, len(actuals)),
            [*params, *(reservation_id for reservation_id, _ in actuals)],
        )
        rows = cursor.fetchall()
    return [(pk, raw_sql.field_value(model, "amount_usd", amount), *ledgers) for pk, amount, *ledgers in rows]


def ledgers_move(moves: Sequence[tuple[int, Decimal, Decimal]]) -> None:
    """Each ledger's (id, hold released, spend added), one row at a time in the order given: the
    caller sorts them by id, as admission holds them (locking them all in one statement locks
    them in whatever order PostgreSQL scans them, which deadlocked against another process).
    The statements go at once (`raw_sql.execute_in_order`: one round trip on PostgreSQL)."""
    raw_sql.execute_in_order(
        [
            (
                _move_sql(connection.vendor),
                [
                    raw_sql.db_value(BudgetLedger, "reserved_usd", held),
                    raw_sql.db_value(BudgetLedger, "spent_usd", spent),
                    ledger_id,
                ],
            )
            for ledger_id, held, spent in moves
        ]
    )


@functools.cache
def _claim_sql(vendor: str, rows: int) -> str:
    """`settled_at = %s, actual = CASE id WHEN %s THEN %s ... END WHERE id IN (...) AND settled_at
    IS NULL RETURNING ...`, made once per group size."""
    model = BudgetReservation
    returned = raw_sql.columns(model, "id", "amount_usd", "team_ledger", "member_ledger", "key_ledger")
    settled_at, actual = raw_sql.column(model, "settled_at"), raw_sql.column(model, "actual_usd")
    pk = raw_sql.column(model, "id")
    # Only our own table and column names are formatted in; every value is a parameter.
    return (
        f"UPDATE {raw_sql.table(model)} SET {settled_at} = %s, "  # noqa: S608
        f"{actual} = CASE {pk} {' '.join(['WHEN %s THEN %s'] * rows)} END "
        f"WHERE {pk} IN ({', '.join(['%s'] * rows)}) AND {settled_at} IS NULL RETURNING {returned}"
    )


@functools.cache
def _move_sql(vendor: str) -> str:
    """The hold released and the spend added, with the casts the ORM puts on SQLite's decimals."""
    reserved, spent = raw_sql.column(BudgetLedger, "reserved_usd"), raw_sql.column(BudgetLedger, "spent_usd")
    number = raw_sql.decimal_parameter(vendor)
    return (
        f"UPDATE {raw_sql.table(BudgetLedger)} SET {reserved} = {reserved} - {number}, "  # noqa: S608
        f"{spent} = {spent} + {number} WHERE {raw_sql.column(BudgetLedger, 'id')} = %s"
    )
