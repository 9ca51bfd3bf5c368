"""Settlement: a hold replaced by what the request really cost, once, or given back by the sweep."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from playground.usage.budgets.alerts import budget_alerts_check
from playground.usage.budgets.ledger import Reservation
from playground.usage.models import BudgetReservation, UsageRecord
from playground.usage.pricing import ZERO
from playground.usage.statements.settlement import ledgers_move, reservations_claim

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

    Claims the reservations first, writing their actual costs, with one `UPDATE ... WHERE
    settled_at IS NULL RETURNING ...` (a reservation the sweep or another call settled meanwhile
    is skipped, never counted twice), then moves each ledger once by the sum of its reservations:
    a group of requests settled together (`usage.calls.settlement`) costs the same few
    statements as one.
    """
    actual_of = {reservation.id: actual for reservation, actual in settlements}
    claimed = reservations_claim(list(actual_of.items()), now=timezone.now())
    if not claimed:
        return set()
    moves: dict[int, tuple[Decimal, Decimal]] = {}  # ledger id: (released hold, added spend)
    team_ledgers = set()
    for pk, amount, *ledger_ids in claimed:
        team_ledgers.add(ledger_ids[0])
        for ledger_id in filter(None, ledger_ids):
            held, spent = moves.get(ledger_id, (ZERO, ZERO))
            moves[ledger_id] = (held + amount, spent + actual_of[pk])
    ledgers_move([(ledger_id, *moves[ledger_id]) for ledger_id in sorted(moves)])
    return team_ledgers


def budget_alerts_after(team_ledgers: set[int]) -> None:
    """The alert thresholds of each team ledger a settlement moved (`budget_settle_many`)."""
    for ledger_id in sorted(team_ledgers):
        try:
            budget_alerts_check(ledger_id=ledger_id)
        except Exception:  # an alert that cannot be recorded must not undo the accounting
            logger.exception("budget alert check failed")


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
