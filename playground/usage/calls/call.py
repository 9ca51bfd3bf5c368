"""The one metered call: how every feature sends a request upstream (reserve → stream → meter → settle).

A chat turn, a tool continuation, a compare column, a batch item and a gateway request each
build a `ChatRequest` and a `RequestContext` (with their builder in `calls.kinds`), then
iterate `MeteredCall.events()`. It holds the budget (unless `budget` says another step holds
it: `calls.budget`), streams the adapter, feeds the meter, and, however the stream ends (the
answer, an upstream error, data nobody could read, a cancelled task or a closed generator),
writes the usage record and settles the budget in its `finally`, shielded from cancellation,
alone with what the feature keeps or grouped with other calls' (`calls.settlement`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from decimal import Decimal

from asgiref.sync import async_to_sync, sync_to_async

from playground.lib.asyncutil import finish_even_if_cancelled
from playground.providers.adapters import ChatAdapter, ChatRequest
from playground.providers.answer_collector import AnswerCollector
from playground.providers.events import StreamEvent, UpstreamError
from playground.providers.structured_answers import answer_format
from playground.usage.budgets import Reservation
from playground.usage.calls.budget import (
    BudgetHold,
    Held,
    HoldAtAdmission,
    HoldOnSend,
    HoldState,
    Refused,
    calls_hold_together,
)
from playground.usage.calls.context import RequestContext, RouteRecord
from playground.usage.calls.settlement import Grouped, Settlement, settle
from playground.usage.metering import Outcome, UsageMeter
from playground.usage.models import UsageRecord
from playground.usage.pricing import cost_for
from playground.usage.records import request_price_card

logger = logging.getLogger(__name__)

STREAM_FAILED = "The answer stopped: the upstream sent data the playground could not read."


@dataclass
class MeteredCall:
    """One upstream request and its usage record. `record` is set once `events()` has ended."""

    adapter: ChatAdapter
    request: ChatRequest
    context: RequestContext
    context_window: int | None = None  # the model's, when the catalogue knows it
    budget: BudgetHold = field(default_factory=HoldOnSend)
    settlement: Settlement = field(default_factory=Grouped)
    # Awaited when the upstream's answer is complete, before its record is written: a caller
    # that can answer without the record (the gateway's whole answers, with `cost()`) does so
    # here rather than after the write. Not called for a cancelled call; its errors are logged.
    on_answered: Callable[[Outcome], Awaitable[None]] | None = None
    record: UsageRecord | None = field(default=None, init=False)
    outcome: Outcome | None = field(default=None, init=False)
    hold: HoldState = field(default=None, init=False)  # `calls.budget`
    # Set by the caller before it cancels the stream because the user asked to (Stop): the
    # record then says so, where a cancellation alone reads as a client that went away.
    stopped_by_user: bool = field(default=False, init=False)
    # What a routing policy decided so far, set by the gateway as the attempt goes (a plain
    # attribute: copying the frozen context for each step cost a routed request ~15 µs).
    route: RouteRecord | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        # The record keeps the body as the adapter sends it (redacted), whatever path sent it,
        # and, when it asked for a JSON answer, whether the answer held to that format.
        self.context = replace(
            self.context,
            request_body=self.adapter.body_as_sent(self.request),
            answer_format=answer_format(self.request.response_format),
            variables=dict(self.request.variables) if self.request.variables else None,
        )

    @property
    def record_context(self) -> RequestContext:
        """The context its record is written from: with the routing decision, when there is one."""
        return self.context if self.route is None else replace(self.context, route=self.route)

    @property
    def reservation(self) -> Reservation | None:
        """The budget this call holds until its record is written (`playground.usage.budgets`)."""
        return self.hold.reservation if isinstance(self.hold, Held) else None

    @property
    def refusal(self) -> str:
        """Why nothing was sent ("" when the budget was held)."""
        return self.hold.reason if isinstance(self.hold, Refused) else ""

    @property
    def refusal_code(self) -> str:
        return self.hold.code if isinstance(self.hold, Refused) else ""

    async def events(self) -> AsyncGenerator[StreamEvent]:
        if self.hold is None and isinstance(self.budget, HoldAtAdmission):
            # A bug in the caller, raised before anything is metered: sent unheld, the request
            # would escape its budget.
            raise RuntimeError("a call held at admission was started before calls_hold_together held it")
        meter = UsageMeter(
            prompt_chars=self.request.prompt_chars,
            context_window=self.context_window,
            keep_text=self.context.answer_format is not None,  # checked once, by the record's writer
        )
        cancelled = True  # until the stream ends by itself
        try:
            if self.hold is None:
                # Shielded: a reservation made in the worker thread is never lost to a cancellation.
                await finish_even_if_cancelled(sync_to_async(calls_hold_together)([self]))
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
            await finish_even_if_cancelled(settle(self))

    async def abandon(self) -> None:
        """For a call held at admission whose `events()` never ran (its client left first): the
        record, `client_disconnected` with nothing sent, and the hold given back."""
        if self.outcome is not None:
            return
        self.outcome = UsageMeter(prompt_chars=0).outcome(cancelled=True, rejected_reason=self.refusal)
        await finish_even_if_cancelled(settle(self))

    def cost(self) -> Decimal:
        """What the ended call costs (`outcome`), priced as its record will be: the same card,
        the one cost function."""
        assert self.outcome is not None
        card = request_price_card(context=self.context).card
        return Decimal(cost_for(usage=self.outcome.usage, card=card).stored().total)

    def run(self) -> AnswerCollector:
        """Send the request and wait for the whole answer, from synchronous code."""
        return async_to_sync(self.collect)()

    async def collect(self, answer: AnswerCollector | None = None) -> AnswerCollector:
        """The whole answer, gathered into `answer` (pass one that the settlement's `keep` also reads)."""
        answer = answer if answer is not None else AnswerCollector()
        async with aclosing(self.events()) as events:
            async for event in events:
                answer.observe(event)
        return answer
