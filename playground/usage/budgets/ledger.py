"""The month's ledger rows (a team's, a member's, an API key's), found once and remembered by id.

Money is held on them by one conditional UPDATE per row (`statements.ledger.ledger_hold`).
"""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from cachetools import LRUCache
from django.db import IntegrityError, transaction
from django.db.models import Sum

from playground.accounts.models import Team
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
