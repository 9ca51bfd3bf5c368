"""How a call's record and budget settlement are written: alone, or grouped with other calls'.

A value the call is built with, not a rule inferred from its other settings:
- `Alone(keep, atomic)`: the record, then what the feature keeps of the answer (`keep`: the
  chat turn's assistant message, the compare column's answer, the batch item's result), in a
  worker-thread step of the call's own; `keep` runs even when the record could not be written
  (with None). `atomic`: the record and what is kept commit together or neither does (a
  failure in either is raised), for features that send the request again when its result is
  missing (batch items), so a worker killed between the two writes cannot leave a record
  without a result.
- `Grouped()`: the feature keeps nothing (the gateway): the call joins its event loop's
  settle queue, written with the calls ending meanwhile.

Group commit. Written one call at a time, each call's end was two transactions and some
fifteen statements (the record, ten rollup upserts, the reservation and three ledgers), all in
asgiref's one ORM thread: at the gateway's load it was a third of that thread's time. In the
queue, while one group is being written, the calls ending meanwhile wait, and go as the next
group, in one transaction: one INSERT for the records, one upsert per rollup bucket, one move
per ledger (`usage_records_create_many`, `budget_settle_many`). Alone, a call is written at
once; under load a group starts at most every `USAGE_SETTLE_EVERY_MS` after the one before: a
group costs mostly what does not grow with it (its transaction, the WAL pages of the record
table's indexes, one upsert per rollup bucket), so at the gateway's rate a group of 4 cost
1.7 ms of the database thread per call (issue 24) and larger ones cost less per call.

A group that cannot be written together (one bad record rolls the whole group back) is
written one call at a time (`settle_alone`), each with its own fallback, so one call's failure
costs no other call its record.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction

from playground.lib.asyncutil import GroupQueue, loop_local
from playground.usage.budgets import (
    Reservation,
    budget_alerts_after,
    budget_reconcile,
    budget_settle_many,
    record_cost_for_budget,
)
from playground.usage.calls.context import RequestContext
from playground.usage.metering import Outcome
from playground.usage.models import UsageRecord
from playground.usage.records import usage_record_create, usage_records_create_many

logger = logging.getLogger(__name__)

# What a feature keeps of an ended call, given its record (None: even the minimal one failed).
Keep = Callable[[UsageRecord | None, Outcome], None]


@dataclass(frozen=True)
class Alone:
    """The record and then `keep`, in a step of the call's own; `atomic`: committed together."""

    keep: Keep
    atomic: bool = False


@dataclass(frozen=True)
class Grouped:
    """The record alone, written with those of the calls ending meanwhile (the settle queue)."""


type Settlement = Alone | Grouped


class Settling(Protocol):
    """A call that has ended (`outcome` set) and waits for its record and settlement."""

    outcome: Outcome | None
    record: UsageRecord | None
    settlement: Settlement

    @property
    def record_context(self) -> RequestContext:
        """What its record says of the request (its context, with what was decided as it ran)."""

    @property
    def reservation(self) -> Reservation | None:
        """The budget this call holds and settles with its record (None: nothing to settle)."""


async def settle(call: Settling) -> None:
    """Write `call`'s record and settle its budget, as its `settlement` says."""
    if isinstance(call.settlement, Grouped):
        await settle_queue().settle(call)
    else:
        await sync_to_async(settle_alone)(call)


def settle_alone(call: Settling) -> None:
    """The record (and what the feature keeps), then the budget counts what it really cost."""
    assert call.outcome is not None
    try:
        _store(call, call.outcome)
    finally:
        reservation = call.reservation
        if reservation is not None:
            try:
                budget_reconcile(
                    reservation=reservation, actual=record_cost_for_budget(call.record, reservation)
                )
            except Exception:  # left to the sweep (BUDGET_RESERVATION_TTL)
                logger.exception("a budget reservation could not be reconciled")


def _store(call: Settling, outcome: Outcome) -> None:
    """The usage record, then the feature's result: a failure of the first does not lose the second."""
    settlement = call.settlement
    if isinstance(settlement, Alone) and settlement.atomic:
        with transaction.atomic():
            call.record = usage_record_create(context=call.record_context, outcome=outcome)
            settlement.keep(call.record, outcome)
        return
    try:
        call.record = usage_record_create(context=call.record_context, outcome=outcome)
    except Exception:  # even the minimal record failed; the result is still worth keeping
        logger.exception("no usage record could be written for a %s request", call.record_context.path)
    if isinstance(settlement, Alone):
        settlement.keep(call.record, outcome)


def calls_settle_together(calls: Sequence[Settling]) -> None:
    """The records of `calls` and their budget settlements in one transaction, or one by one."""
    settled = []
    for call in calls:
        assert call.outcome is not None
        settled.append((call.record_context, call.outcome))
    try:
        with transaction.atomic():
            records = usage_records_create_many(settled)
            team_ledgers = budget_settle_many(
                [
                    (reservation, record_cost_for_budget(record, reservation))
                    for call, record in zip(calls, records, strict=True)
                    if (reservation := call.reservation) is not None
                ]
            )
    except Exception:
        logger.exception(
            "%d usage records could not be written together; writing them one by one", len(calls)
        )
        for call in calls:
            settle_alone(call)
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
