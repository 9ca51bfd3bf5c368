"""Settlement: a hold replaced by what the request really cost, once, or given back by the sweep."""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from playground.lib import raw_sql
from playground.usage.budgets.alerts import budget_alerts_check
from playground.usage.budgets.ledger import Reservation
from playground.usage.models import BudgetLedger, BudgetReservation, UsageRecord
from playground.usage.pricing import ZERO

logger = logging.getLogger(__name__)


def budget_reconcile(*, reservation: Reservation, actual: Decimal) -> bool:
    """Replace the hold by what the request really cost; once (a second call does nothing).

    Returns whether this call settled it. Checks the team's alert thresholds afterwards (their
    e-mail goes out through Celery once the caller's transaction commits).
    """
    with transaction.atomic():
        team_ledgers = budget_settle_many([(reservation, actual)])
    budget_alerts_after(team_ledgers)
    return bool(team_ledgers)


def budget_settle_many(settlements: Sequence[tuple[Reservation, Decimal]]) -> set[int]:
    """Settle each reservation not settled yet at its actual cost, in the caller's transaction;
    the ids of the team ledgers it touched (for `budget_alerts_after`, once that commits).

    Claims the reservations first, with one `UPDATE ... WHERE settled_at IS NULL RETURNING ...`
    (a reservation the sweep or another call settled meanwhile is skipped, never counted
    twice), then moves each ledger once by the sum of its reservations: a group of requests
    settled together (`usage.calls.settlement`) costs the same few statements as one.
    """
    actual_of = {reservation.id: actual for reservation, actual in settlements}
    claimed = _claim(list(actual_of), now=timezone.now())
    if not claimed:
        return set()
    moves: dict[int, tuple[Decimal, Decimal]] = {}  # ledger id: (released hold, added spend)
    team_ledgers = set()
    for pk, amount, *ledger_ids in claimed:
        team_ledgers.add(ledger_ids[0])
        for ledger_id in filter(None, ledger_ids):
            held, spent = moves.get(ledger_id, (ZERO, ZERO))
            moves[ledger_id] = (held + amount, spent + actual_of[pk])
    with connection.cursor() as cursor:
        cursor.executemany(
            _actual_sql(connection.vendor),
            [[raw_sql.db_value(BudgetReservation, "actual_usd", actual_of[pk]), pk] for pk, *_ in claimed],
        )
        # One row at a time in id order, as admission holds them (locking them all in one
        # statement locks them in whatever order PostgreSQL scans them, which deadlocked
        # against another process).
        for ledger_id in sorted(moves):
            held, spent = moves[ledger_id]
            cursor.execute(
                _move_sql(connection.vendor),
                [
                    raw_sql.db_value(BudgetLedger, "reserved_usd", held),
                    raw_sql.db_value(BudgetLedger, "spent_usd", spent),
                    ledger_id,
                ],
            )
    return team_ledgers


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


def budget_alerts_after(team_ledgers: set[int]) -> None:
    """The alert thresholds of each team ledger a settlement moved (`budget_settle_many`)."""
    for ledger_id in sorted(team_ledgers):
        try:
            budget_alerts_check(ledger_id=ledger_id)
        except Exception:  # an alert that cannot be recorded must not undo the accounting
            logger.exception("budget alert check failed")


def _claim(ids: list[int], *, now: dt.datetime) -> list[tuple[Any, ...]]:
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


def budget_release(*, reservation: Reservation) -> bool:
    """Give a reservation back whole: the request was never sent (for batch chunks)."""
    return budget_reconcile(reservation=reservation, actual=ZERO)


def record_cost_for_budget(record: UsageRecord | None, reservation: Reservation) -> Decimal:
    """What a finished request counts against the budget: its record's cost, or, when no full
    record could be written (its cost is unknown), the reserved worst case."""
    if record is None or record.error_code == "record_write_failed":
        return reservation.amount
    return Decimal(record.total_cost)


def budget_reservations_sweep(*, team_id: int | None = None) -> int:
    """Release reservations older than `BUDGET_RESERVATION_TTL` seconds whose process died
    before reconciling them (nothing else would ever give them back)."""
    cutoff = timezone.now() - dt.timedelta(seconds=settings.BUDGET_RESERVATION_TTL)
    stale = BudgetReservation.objects.filter(settled_at__isnull=True, created_at__lt=cutoff)
    if team_id is not None:
        stale = stale.filter(team_id=team_id)
    released = 0
    for reservation_id, amount in stale.values_list("id", "amount_usd")[:100]:
        logger.warning("releasing budget reservation %s: never reconciled", reservation_id)
        released += budget_release(reservation=Reservation(id=reservation_id, amount=amount))
    return released
