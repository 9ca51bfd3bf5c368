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
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

from asgiref.sync import async_to_sync, sync_to_async

from playground.asyncutil import finish_even_if_cancelled
from playground.providers.adapters import ChatAdapter, ChatRequest
from playground.providers.answer import AnswerCollector
from playground.providers.events import StreamEvent, UpstreamError
from playground.usage.metering import Outcome, UsageMeter
from playground.usage.models import UsageRecord
from playground.usage.services import RequestContext, usage_record_create

logger = logging.getLogger(__name__)

STREAM_FAILED = "The answer stopped: the upstream sent data the playground could not read."

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
    record: UsageRecord | None = field(default=None, init=False)
    outcome: Outcome | None = field(default=None, init=False)

    async def events(self) -> AsyncGenerator[StreamEvent]:
        meter = UsageMeter(prompt_chars=self.request.prompt_chars, context_window=self.context_window)
        cancelled = True  # until the stream ends by itself
        try:
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
            self.outcome = meter.outcome(cancelled=cancelled)
            await finish_even_if_cancelled(sync_to_async(self._store)(self.outcome))

    def _store(self, outcome: Outcome) -> None:
        """The usage record, then the feature's result: a failure of the first does not lose the second."""
        try:
            self.record = usage_record_create(context=self.context, outcome=outcome)
        except Exception:  # even the minimal record failed; the result is still worth keeping
            logger.exception("no usage record could be written for a %s request", self.context.path)
        if self.after_record is not None:
            self.after_record(self.record, outcome)

    def run(self) -> AnswerCollector:
        """Send the request and wait for the whole answer: for synchronous callers (Celery tasks)."""
        return async_to_sync(self.collect)()

    async def collect(self) -> AnswerCollector:
        answer = AnswerCollector()
        async with aclosing(self.events()) as events:
            async for event in events:
                answer.observe(event)
        return answer
