"""The ledger's statements: the one conditional UPDATE that holds money, and the ledger read with its budget.

The hold is one conditional UPDATE per ledger row (the team's, then the member's, then an API
key's) in one transaction:

    UPDATE ledger SET reserved = reserved + cost
    WHERE id = … AND spent <= limit - cost - reserved

The database re-checks the condition against the row as the previous writer left it
(PostgreSQL waits for that writer's lock, SQLite serializes writers), so concurrent
requests cannot all pass a check made before any of them was counted (LiteLLM #34732).
"""

from __future__ import annotations

import datetime as dt
import functools
from decimal import Decimal

from django.db import connection

from playground.usage.models import BudgetLedger, TeamBudget
from playground.usage.statements import raw_sql


def ledger_hold(ledger_id: int, amount: Decimal, limit: Decimal | None) -> bool:
    """The one conditional UPDATE: raise `reserved` only if the limit still covers it.

    Every gateway request runs it three times (issue 24)."""
    held = raw_sql.db_value(BudgetLedger, "reserved_usd", amount)
    with connection.cursor() as cursor:
        if limit is None:
            cursor.execute(_hold_sql(connection.vendor, limited=False), [held, ledger_id])
        else:
            room = raw_sql.db_value(BudgetLedger, "spent_usd", Decimal(limit) - amount)
            cursor.execute(_hold_sql(connection.vendor, limited=True), [held, ledger_id, room])
        return bool(cursor.rowcount == 1)


@functools.cache
def _hold_sql(vendor: str, *, limited: bool) -> str:
    """`reserved += amount WHERE id = … [AND spent <= (limit - amount) - reserved]`, with the
    casts the ORM puts on SQLite's decimal arithmetic (its columns are NUMERIC, computed as REAL)."""
    reserved, spent = raw_sql.column(BudgetLedger, "reserved_usd"), raw_sql.column(BudgetLedger, "spent_usd")
    number = raw_sql.decimal_parameter(vendor)
    sql = (
        f"UPDATE {raw_sql.table(BudgetLedger)} SET {reserved} = {reserved} + {number} "  # noqa: S608
        f"WHERE {raw_sql.column(BudgetLedger, 'id')} = %s"
    )
    return sql + f" AND {spent} <= {number} - {reserved}" if limited else sql


def ledger_with_budget(ledger_id: int) -> tuple[int, dt.date, Decimal, Decimal | None, list[int] | None]:
    """The ledger's team, month and spend, with its team's limit and alert thresholds: every
    settlement of a gateway request group checks them (issue 24)."""
    with connection.cursor() as cursor:
        cursor.execute(_ledger_and_budget_sql(connection.vendor), [ledger_id])
        team_id, month, spent, limit, thresholds = cursor.fetchone()
    return (
        team_id,
        raw_sql.field_value(BudgetLedger, "month", month),
        raw_sql.field_value(BudgetLedger, "spent_usd", spent),
        raw_sql.field_value(TeamBudget, "monthly_limit_usd", limit),
        raw_sql.field_value(TeamBudget, "alert_thresholds", thresholds),
    )


@functools.cache
def _ledger_and_budget_sql(vendor: str) -> str:
    ledger = raw_sql.columns(BudgetLedger, "team", "month", "spent_usd", alias="l")
    budget = raw_sql.columns(TeamBudget, "monthly_limit_usd", "alert_thresholds", alias="b")
    return (
        f"SELECT {ledger}, {budget} FROM {raw_sql.table(BudgetLedger)} l "  # noqa: S608
        f"LEFT JOIN {raw_sql.table(TeamBudget)} b "
        f"ON b.{raw_sql.column(TeamBudget, 'team')} = l.{raw_sql.column(BudgetLedger, 'team')} "
        f"WHERE l.{raw_sql.column(BudgetLedger, 'id')} = %s"
    )
