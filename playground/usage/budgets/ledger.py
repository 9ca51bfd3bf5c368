"""The month's ledger rows (a team's, a member's) and the one conditional UPDATE that holds money on them.

Admission is one conditional UPDATE per ledger row (the team's, then the member's) in one
transaction:

    UPDATE ledger SET reserved = reserved + cost
    WHERE id = … AND spent <= limit - cost - reserved

The database re-checks the condition against the row as the previous writer left it
(PostgreSQL waits for that writer's lock, SQLite serializes writers), so concurrent
requests cannot all pass a check made before any of them was counted (LiteLLM #34732).
"""

from __future__ import annotations

import datetime as dt
import functools
import threading
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from cachetools import LRUCache
from django.db import IntegrityError, connection, transaction
from django.db.models import Sum

from playground.accounts.models import Team
from playground.lib import raw_sql
from playground.usage.budgets.months import month_bounds
from playground.usage.models import BudgetLedger, UsageRecord
from playground.usage.pricing import ZERO


@dataclass(frozen=True)
class Reservation:
    """A hold on the ledgers, as `budget_reserve` returns it and `budget_reconcile` settles it."""

    id: int
    amount: Decimal


# A ledger row, once made, keeps its id for good (a team's deletion takes its rows with it,
# `ledgers_forget`): each process remembers the ids it found, so admission holds money with
# UPDATEs alone instead of first reading three rows (issue 24).
_ledger_ids: LRUCache[tuple[int, int | None, int | None, dt.date], int] = LRUCache(maxsize=65536)
_ledger_ids_lock = threading.Lock()


def ledger_id_for_month(
    *, team: Team, user_id: int | None, month: dt.date, api_key_id: int | None = None
) -> int:
    """The id of the month's ledger row (the team's, a member's or an API key's), created with
    what the month's records already cost."""
    key = (team.pk, user_id, api_key_id, month)
    with _ledger_ids_lock:
        known = _ledger_ids.get(key)
    if known is not None:
        return known
    ledger_id = _ledger_for_month(team=team, user_id=user_id, month=month, api_key_id=api_key_id).pk
    with _ledger_ids_lock:
        _ledger_ids[key] = ledger_id
    return ledger_id


def ledgers_forget(**_: object) -> None:
    """Forget every remembered ledger id (a signal receiver: a ledger row was deleted)."""
    with _ledger_ids_lock:
        _ledger_ids.clear()


def _ledger_for_month(
    *, team: Team, user_id: int | None, month: dt.date, api_key_id: int | None
) -> BudgetLedger:
    scope: dict[str, Any]
    if api_key_id is not None:
        scope = {"api_key_id": api_key_id}
    elif user_id is not None:
        scope = {"user_id": user_id}
    else:
        scope = {"user__isnull": True, "api_key__isnull": True}
    ledger = BudgetLedger.objects.filter(team=team, month=month, **scope).first()
    if ledger is not None:
        return ledger
    start, end = month_bounds(team, month)
    records = UsageRecord.objects.filter(team=team, created_at__gte=start, created_at__lt=end)
    if api_key_id is not None:
        records = records.filter(api_key_id=api_key_id)
    elif user_id is not None:
        records = records.filter(user_id=user_id)
    spent = records.aggregate(total=Sum("total_cost"))["total"] or ZERO
    owner = {"api_key_id": api_key_id} if api_key_id is not None else {"user_id": user_id}
    try:
        with transaction.atomic():
            return BudgetLedger.objects.create(team=team, month=month, spent_usd=spent, **owner)
    except IntegrityError:  # another request created it first
        return BudgetLedger.objects.get(team=team, month=month, **scope)


def ledger_hold(ledger_id: int, amount: Decimal, limit: Decimal | None) -> bool:
    """The one conditional UPDATE: raise `reserved` only if the limit still covers it.

    Hand-written (`lib.raw_sql`): every gateway request runs it three times (issue 24)."""
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
