"""Settlement's statements: reservations claimed once, their actual cost written, the ledgers moved.

A settlement claims its reservations first, with one `UPDATE ... WHERE settled_at IS NULL
RETURNING ...` (a reservation the sweep or another call settled meanwhile is skipped, never
counted twice), then writes each one's actual cost, then moves each ledger once by the sum of
its reservations (`budgets.settlement.budget_settle_many`).
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


def reservations_claim(ids: list[int], *, now: dt.datetime) -> list[tuple[Any, ...]]:
    """Mark unsettled reservations among `ids` settled; (id, amount, team ledger, member ledger,
    key ledger) of each this call marked."""
    if not ids:
        return []
    model = BudgetReservation
    returned = raw_sql.columns(model, "id", "amount_usd", "team_ledger", "member_ledger", "key_ledger")
    settled_at, pk = raw_sql.column(model, "settled_at"), raw_sql.column(model, "id")
    # Only our own table and column names are formatted in; every value is a parameter.
    sql = (
        f"UPDATE {raw_sql.table(model)} SET {settled_at} = %s "  # noqa: S608
        f"WHERE {pk} IN ({', '.join(['%s'] * len(ids))}) AND {settled_at} IS NULL RETURNING {returned}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [raw_sql.db_value(model, "settled_at", now), *ids])
        rows = cursor.fetchall()
    return [(pk, raw_sql.field_value(model, "amount_usd", amount), *ledgers) for pk, amount, *ledgers in rows]


def reservations_set_actual(actuals: Sequence[tuple[int, Decimal]]) -> None:
    """Each claimed reservation's (id, actual cost) written, in one `executemany`."""
    with connection.cursor() as cursor:
        cursor.executemany(
            _actual_sql(connection.vendor),
            [[raw_sql.db_value(BudgetReservation, "actual_usd", actual), pk] for pk, actual in actuals],
        )


def ledgers_move(moves: Sequence[tuple[int, Decimal, Decimal]]) -> None:
    """Each ledger's (id, hold released, spend added), one row at a time in the order given: the
    caller sorts them by id, as admission holds them (locking them all in one statement locks
    them in whatever order PostgreSQL scans them, which deadlocked against another process)."""
    with connection.cursor() as cursor:
        for ledger_id, held, spent in moves:
            cursor.execute(
                _move_sql(connection.vendor),
                [
                    raw_sql.db_value(BudgetLedger, "reserved_usd", held),
                    raw_sql.db_value(BudgetLedger, "spent_usd", spent),
                    ledger_id,
                ],
            )


@functools.cache
def _actual_sql(vendor: str) -> str:
    actual, pk = raw_sql.column(BudgetReservation, "actual_usd"), raw_sql.column(BudgetReservation, "id")
    return f"UPDATE {raw_sql.table(BudgetReservation)} SET {actual} = %s WHERE {pk} = %s"  # noqa: S608


@functools.cache
def _move_sql(vendor: str) -> str:
    """The hold released and the spend added, with the casts the ORM puts on SQLite's decimals."""
    reserved, spent = raw_sql.column(BudgetLedger, "reserved_usd"), raw_sql.column(BudgetLedger, "spent_usd")
    number = raw_sql.decimal_parameter(vendor)
    return (
        f"UPDATE {raw_sql.table(BudgetLedger)} SET {reserved} = {reserved} - {number}, "  # noqa: S608
        f"{spent} = {spent} + {number} WHERE {raw_sql.column(BudgetLedger, 'id')} = %s"
    )
