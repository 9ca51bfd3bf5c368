"""Settlement: a hold replaced by what the request really cost, once, or given back by the sweep."""

from __future__ import annotations

import datetime as dt
import logging
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

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
        settled = BudgetReservation.objects.filter(pk=reservation.id, settled_at__isnull=True).update(
            settled_at=timezone.now(), actual_usd=actual
        )
        if not settled:
            return False
        row = BudgetReservation.objects.get(pk=reservation.id)
        ledger_ids = [row.team_ledger_id, *(i for i in (row.member_ledger_id, row.key_ledger_id) if i)]
        # One row at a time in id order, as admission holds them (`pk__in` locks rows in
        # whatever order PostgreSQL scans them, which deadlocked against another process).
        for ledger_id in sorted(ledger_ids):
            BudgetLedger.objects.filter(pk=ledger_id).update(
                reserved_usd=F("reserved_usd") - row.amount_usd, spent_usd=F("spent_usd") + actual
            )
    try:
        budget_alerts_check(ledger_id=row.team_ledger_id)
    except Exception:  # an alert that cannot be recorded must not undo the accounting
        logger.exception("budget alert check failed")
    return True


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
