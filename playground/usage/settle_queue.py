"""Group commit: the records and budget settlements of calls that end together, written together.

Each metered call ends with its usage record and its budget settlement. Written one call at
a time, that was two transactions and some fifteen statements per request (the record, ten
rollup upserts, the reservation and three ledgers), all in asgiref's one ORM thread: at the
gateway's load it was a third of that thread's time. Here a call that keeps nothing of its
own (`MeteredCall.after_record` unset) joins its event loop's queue: while one group is being
written, the calls ending meanwhile wait, and go as the next group, in one transaction:
one INSERT for the records, one upsert per rollup bucket, one move per ledger
(`usage_records_create_many`, `budget_settle_many`). Alone, a call is written at once; under
load a group starts at most every `USAGE_SETTLE_EVERY_MS` after the one before: a group costs
mostly what does not grow with it (its transaction, the WAL pages of the record table's
indexes, one upsert per rollup bucket), so at the gateway's rate a group of 4 cost 1.7 ms of
the database thread per call (issue 24) and larger ones cost less per call.

A group that cannot be written together (one bad record rolls the whole group back) is
written one call at a time, each with its own fallback, so one call's failure costs no other
call its record.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Sequence
from typing import Protocol

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction

from playground.lib.asyncutil import GroupQueue, loop_local
from playground.usage.budgets import (
    Reservation,
    budget_alerts_after,
    budget_settle_many,
    record_cost_for_budget,
)
from playground.usage.metering import Outcome
from playground.usage.models import UsageRecord
from playground.usage.services import RequestContext, usage_records_create_many

logger = logging.getLogger(__name__)


class Settling(Protocol):
    """A call that has ended (`outcome` set) and waits for its record and settlement."""

    context: RequestContext
    outcome: Outcome | None
    reservation: Reservation | None
    record: UsageRecord | None

    def store_and_reconcile(self) -> None:
        """Its record and settlement written alone (the fallback)."""


def calls_settle_together(calls: Sequence[Settling]) -> None:
    """The records of `calls` and their budget settlements in one transaction, or one by one."""
    settled = []
    for call in calls:
        assert call.outcome is not None
        settled.append((call.context, call.outcome))
    try:
        with transaction.atomic():
            records = usage_records_create_many(settled)
            team_ledgers = budget_settle_many(
                [
                    (call.reservation, record_cost_for_budget(record, call.reservation))
                    for call, record in zip(calls, records, strict=True)
                    if call.reservation is not None
                ]
            )
    except Exception:
        logger.exception(
            "%d usage records could not be written together; writing them one by one", len(calls)
        )
        for call in calls:
            call.store_and_reconcile()
        return
    for call, record in zip(calls, records, strict=True):
        call.record = record
    budget_alerts_after(team_ledgers)


class SettleQueue(GroupQueue[Settling, None]):
    """The calls of one event loop waiting for their records, written a group at a time."""

    def __init__(self) -> None:
        super().__init__(self._write, every=settings.USAGE_SETTLE_EVERY_MS / 1000)

    async def settle(self, call: Settling) -> None:
        """Return once `call`'s record and settlement are written (with those of its group)."""
        await self.submit(call)

    @staticmethod
    async def _write(calls: list[Settling]) -> list[Exception | None]:
        await sync_to_async(calls_settle_together)(calls)
        return [None] * len(calls)


_queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SettleQueue] = weakref.WeakKeyDictionary()


def settle_queue() -> SettleQueue:
    """The running event loop's queue."""
    return loop_local(_queues, SettleQueue)
