"""The one metered call: how every feature sends a request upstream.

A chat turn, a tool continuation and a batch item all build a `ChatRequest` and a
`RequestContext`, then iterate `MeteredCall.events()`. It streams the adapter, feeds the
meter, and, however the stream ends (the answer, an upstream error, data nobody could
read, a cancelled task or a closed generator), writes the usage record in its `finally`,
shielded from cancellation. The caller's `after_record` runs in that same step, so what
the feature keeps (the answer, the item's result) is written with the record, and neither
can be skipped by the other.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from decimal import Decimal

from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction

from playground.lib.asyncutil import finish_even_if_cancelled
from playground.providers.adapters import ChatAdapter, ChatRequest
from playground.providers.answer_collector import AnswerCollector
from playground.providers.events import StreamEvent, UpstreamError
from playground.providers.structured_answers import answer_format
from playground.usage.budgets import (
    BudgetExceeded,
    BudgetRequest,
    KeyBudget,
    Reservation,
    budget_reconcile,
    budget_reserve_for_requests,
    record_cost_for_budget,
)
from playground.usage.metering import Outcome, UsageMeter
from playground.usage.models import UsageRecord
from playground.usage.pricing import cost_for
from playground.usage.services import RequestContext, request_price_card, usage_record_create
from playground.usage.settle_queue import settle_queue

logger = logging.getLogger(__name__)

STREAM_FAILED = "The answer stopped: the upstream sent data the playground could not read."
BUDGET_UNCHECKED = "Nothing was sent: the team's budget could not be checked. Try again in a moment."
BUDGET_UNCHECKED_CODE = "budget_unchecked"

AfterRecord = Callable[[UsageRecord | None, Outcome], None]


@dataclass
class MeteredCall:
    """One upstream request and its usage record. `record` is set once `events()` has ended."""

    adapter: ChatAdapter
    request: ChatRequest
    context: RequestContext
    context_window: int | None = None  # the model's, when the catalogue knows it
    # Runs (in a worker thread, blocking is fine) right after the record is written, even
    # when writing it failed (then with None): the feature stores its own result there.
    after_record: AfterRecord | None = None
    # The record and `after_record` commit together, or neither does (a failure in either is
    # raised): for features that send the request again when its result is missing (batch
    # items), so a worker killed between the two writes cannot leave a record without a result.
    store_atomically: bool = False
    # The caller already holds this request's budget (a batch chunk sent to a queue reserves
    # all its items at once, `budgets.budget_reserve`, and reconciles the chunk itself): the
    # call neither reserves nor reconciles. Replaying a queued result must never be refused.
    budget_held: bool = False
    # A gateway request's API key, whose own monthly budget is held with the team's and the member's.
    key_budget: KeyBudget | None = None
    # Awaited when the upstream's answer is complete, before its record is written: a caller
    # that can answer without the record (the gateway's whole answers, with `cost()`) does so
    # here rather than after the write. Not called for a cancelled call; its errors are logged.
    on_answered: Callable[[Outcome], Awaitable[None]] | None = None
    record: UsageRecord | None = field(default=None, init=False)
    outcome: Outcome | None = field(default=None, init=False)
    # The budget held for this request until its record is written (playground.usage.budgets),
    # or why it was refused before anything was sent.
    reservation: Reservation | None = field(default=None, init=False)
    refusal: str = field(default="", init=False)
    refusal_code: str = field(default="", init=False)
    # Set by the caller before it cancels the stream because the user asked to (Stop): the
    # record then says so, where a cancellation alone reads as a client that went away.
    stopped_by_user: bool = field(default=False, init=False)
    _reserved: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        # The record keeps the body as the adapter sends it (redacted), whatever path sent it,
        # and, when it asked for a JSON answer, whether the answer held to that format.
        self.context = replace(
            self.context,
            request_body=self.adapter.body_as_sent(self.request),
            answer_format=answer_format(self.request.response_format),
        )

    async def events(self) -> AsyncGenerator[StreamEvent]:
        meter = UsageMeter(
            prompt_chars=self.request.prompt_chars,
            context_window=self.context_window,
            keep_text=self.context.answer_format is not None,  # checked once, by the record's writer
        )
        cancelled = True  # until the stream ends by itself
        try:
            if not self._reserved:
                # Shielded: a reservation made in the worker thread is never lost to a cancellation.
                await finish_even_if_cancelled(sync_to_async(self.reserve)())
            if self.refusal:  # nothing is sent; the record says why, at cost 0
                refusal = UpstreamError(self.refusal, code=self.refusal_code)
                meter.observe(refusal)
                cancelled = False
                yield refusal
                return
            async with aclosing(self.adapter.stream(self.request)) as upstream:
                async for event in upstream:
                    meter.observe(event)
                    yield event
            cancelled = False
        except Exception:  # not a cancellation: something in the stream could not be read
            logger.exception("a metered call's stream failed")
            meter.observe(UpstreamError(STREAM_FAILED, code="stream_failed"))
            cancelled = False
        finally:
            self.outcome = meter.outcome(
                cancelled=cancelled, stopped_by_user=self.stopped_by_user, rejected_reason=self.refusal
            )
            if self.on_answered is not None and not cancelled:
                try:
                    await self.on_answered(self.outcome)
                except Exception:
                    logger.exception("a metered call's caller could not take its answer")
            await finish_even_if_cancelled(self._settle())

    async def abandon(self) -> None:
        """For a caller that reserved (`reserve`) and then never iterated `events()` (its client
        left first): the record, `client_disconnected` with nothing sent, and the hold given back."""
        if self.outcome is not None:
            return
        self.outcome = UsageMeter(prompt_chars=0).outcome(cancelled=True, rejected_reason=self.refusal)
        await finish_even_if_cancelled(self._settle())

    def cost(self) -> Decimal:
        """What the ended call costs (`outcome`), priced as its record will be: the same card,
        the one cost function."""
        assert self.outcome is not None
        card = request_price_card(context=self.context).card
        return Decimal(cost_for(usage=self.outcome.usage, card=card).stored().total)

    def reserve(self) -> None:
        """Hold the request's worst-case cost on the budgets, or set `refusal` (fails closed).

        `events()` calls it first, in a worker thread. A caller already in a worker thread (the
        gateway's admission) may call it there instead and save `events()` that step; either
        way it runs once, and `events()` then reports a refusal without sending anything.
        The card is looked up once, here, and kept in the context: the reservation and the
        record are priced by the same one."""
        calls_reserve_together([self])

    async def _settle(self) -> None:
        """The record and the budget's settlement: with the calls ending meanwhile when the
        feature keeps nothing of its own (`usage.settle_queue`), else in a step of its own."""
        if self.after_record is None and not self.store_atomically:
            await settle_queue().settle(self)
        else:
            await sync_to_async(self.store_and_reconcile)()

    def store_and_reconcile(self) -> None:
        """The record (and the feature's result), then the budget counts what it really cost."""
        assert self.outcome is not None
        outcome = self.outcome
        try:
            self._store(outcome)
        finally:
            if self.reservation is not None:
                try:
                    budget_reconcile(
                        reservation=self.reservation,
                        actual=record_cost_for_budget(self.record, self.reservation),
                    )
                except Exception:  # left to the sweep (BUDGET_RESERVATION_TTL)
                    logger.exception("a budget reservation could not be reconciled")

    def _store(self, outcome: Outcome) -> None:
        """The usage record, then the feature's result: a failure of the first does not lose the second."""
        if self.store_atomically:
            with transaction.atomic():
                self.record = usage_record_create(context=self.context, outcome=outcome)
                if self.after_record is not None:
                    self.after_record(self.record, outcome)
            return
        try:
            self.record = usage_record_create(context=self.context, outcome=outcome)
        except Exception:  # even the minimal record failed; the result is still worth keeping
            logger.exception("no usage record could be written for a %s request", self.context.path)
        if self.after_record is not None:
            self.after_record(self.record, outcome)

    def run(self) -> AnswerCollector:
        """Send the request and wait for the whole answer, from synchronous code."""
        return async_to_sync(self.collect)()

    async def collect(self, answer: AnswerCollector | None = None) -> AnswerCollector:
        """The whole answer, gathered into `answer` (pass one that `after_record` also reads)."""
        answer = answer if answer is not None else AnswerCollector()
        async with aclosing(self.events()) as events:
            async for event in events:
                answer.observe(event)
        return answer


def calls_reserve_together(calls: Sequence[MeteredCall]) -> None:
    """`MeteredCall.reserve` for calls admitted together (the gateway's, issue 24): each holds
    its budget or is refused exactly as if reserved alone, in order, with the statements of
    one admission when the budgets cover them all (`budgets.budget_reserve_for_requests`)."""
    todo = []
    for call in calls:
        if not call._reserved:
            call._reserved = True
            if not call.budget_held:
                todo.append(call)
    if not todo:
        return
    try:
        requests = []
        for call in todo:
            card = request_price_card(context=call.context)
            call.context = replace(call.context, price_card=card)
            requests.append(
                BudgetRequest(
                    request=call.request,
                    team_id=call.context.team_id,
                    user_id=call.context.user_id,
                    card=card,
                    label=call.context.source or call.context.path,
                    key=call.key_budget,
                )
            )
        outcomes = budget_reserve_for_requests(requests)
    except Exception:
        for call in todo:
            logger.exception("the budget of a %s request could not be checked", call.context.path)
            call.refusal, call.refusal_code = BUDGET_UNCHECKED, BUDGET_UNCHECKED_CODE
        return
    for call, outcome in zip(todo, outcomes, strict=True):
        if isinstance(outcome, BudgetExceeded):
            call.refusal, call.refusal_code = str(outcome), outcome.code
        else:
            call.reservation = outcome
