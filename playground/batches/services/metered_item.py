"""One item's answer, metered and stored: the item as a chat request; its record and result written together.

Each item's upstream answer goes through the one metered call (`usage.calls.kinds.batch_item_call`),
which commits its usage record and its result together; its record's `source` is
`batch-item:<id>:<attempt>` (unique), so a redelivered step can never write a second record
for the same attempt, and an item already done is never sent again.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, replace

from asgiref.sync import sync_to_async
from django.db import IntegrityError
from django.utils import timezone

from playground.batches.models import Batch, BatchItem, ItemState
from playground.providers.adapters import ChatAdapter, ChatRequest
from playground.providers.answer_collector import AnswerCollector
from playground.providers.context_windows import context_window_for
from playground.providers.events import request_at_fault
from playground.usage.calls.context import RequestContext
from playground.usage.calls.kinds import batch_context, batch_item_call
from playground.usage.metering import Outcome
from playground.usage.models import UsageRecord, UsageStatus
from playground.usage.pricing import KnownCard
from playground.usage.records import request_price_card

logger = logging.getLogger(__name__)


def chat_request(batch: Batch, item: BatchItem) -> ChatRequest:
    body = dict(item.request)
    known = {
        key: body.pop(key, None)
        for key in (
            "max_tokens",
            "temperature",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "response_format",
        )
    }
    messages = body.pop("messages")
    variables = body.pop("variables", None)  # the prompt variables' values it was filled with
    return ChatRequest(
        model=batch.model_id,
        messages=messages,
        max_tokens=known["max_tokens"],
        temperature=known["temperature"],
        tools=known["tools"],
        tool_choice=known["tool_choice"],
        parallel_tool_calls=known["parallel_tool_calls"],
        response_format=known["response_format"],
        parameters=body,
        stream=False,
        variables=variables,
    )


def record_context(batch: Batch, item: BatchItem | None, card: KnownCard | None = None) -> RequestContext:
    return batch_context(
        team_id=batch.team_id,
        user_id=batch.created_by_id,
        connection_id=batch.connection_id,
        model_id=batch.model_id,
        preset_version_id=batch.preset_version_id,
        priced_on=batch.priced_on,
        source=item.source if item is not None else "",
        card=card,
        tags=_record_tags(batch, item),
    )


def _record_tags(batch: Batch, item: BatchItem | None) -> tuple[str, ...]:
    if not batch.record_tags:
        return ()
    reference = (item.external_reference,) if item is not None and item.external_reference else ()
    return (*batch.record_tags, *reference)


def draft_context(batch: Batch, day: dt.date) -> RequestContext:
    """The context a draft's items will be recorded under if it is confirmed on `day`."""
    return replace(record_context(batch, None), priced_on=day)


@dataclass(frozen=True)
class ItemTerms:
    """What every item of a batch is checked and priced by, looked up once per step, not per item."""

    context_window: int | None  # the model's on the batch's connection, when known
    card: KnownCard  # the card of the day the batch was submitted


def item_terms(batch: Batch) -> ItemTerms:
    day = batch.priced_on or timezone.now().date()
    window = context_window_for(connection=batch.connection, model_id=batch.model_id, day=day)
    return ItemTerms(
        context_window=window.tokens if window is not None else None,
        card=request_price_card(context=record_context(batch, None)),
    )


def _item_result(
    item: BatchItem, answer: AnswerCollector, record: UsageRecord | None, outcome: Outcome
) -> None:
    """The item's result, written in the same transaction as its usage record."""
    ok = outcome.status == UsageStatus.OK and answer.error is None
    BatchItem.objects.filter(pk=item.pk, attempt=item.attempt).exclude(state=ItemState.DONE).update(
        state=ItemState.DONE if ok else ItemState.FAILED,
        input_refused=not ok and request_at_fault(http_status=outcome.http_status, code=outcome.error_code),
        response={
            "text": answer.text,
            "reasoning": answer.reasoning,
            "tool_calls": [call.as_message_part() for call in answer.tool_calls],
            "finish_reason": answer.finish_reason,
        },
        error="" if ok else (outcome.error_text or "The upstream answered with an error."),
        error_code="" if ok else outcome.error_code[:40],
        usage_record=record,
        finished_at=timezone.now(),
    )


async def item_send(
    batch: Batch,
    item: BatchItem,
    adapter: ChatAdapter,
    terms: ItemTerms,
    *,
    held_by_caller: bool = False,
) -> None:
    """Send (or replay) one item through the metered call; its record and result commit together."""
    if await UsageRecord.objects.filter(source=item.source).aexists():
        # Only possible if a record was written outside this path; never send it twice.
        await sync_to_async(_item_from_existing_record)(item)
        return
    answer = AnswerCollector()
    call = batch_item_call(
        adapter=adapter,
        request=chat_request(batch, item),
        context=record_context(batch, item, terms.card),
        context_window=terms.context_window,
        keep=lambda record, outcome: _item_result(item, answer, record, outcome),
        held_by_caller=held_by_caller,
    )
    try:
        await call.collect(answer)
    except IntegrityError:  # another chain recorded this attempt a moment ago: theirs stands
        logger.warning("batch item %s attempt %s was recorded by another step", item.pk, item.attempt)


def _item_from_existing_record(item: BatchItem) -> None:
    record = UsageRecord.objects.get(source=item.source)
    ok = record.status == UsageStatus.OK
    BatchItem.objects.filter(pk=item.pk, attempt=item.attempt).exclude(state=ItemState.DONE).update(
        state=ItemState.DONE if ok else ItemState.FAILED,
        usage_record=record,
        error="" if ok else (record.error_text or "The upstream answered with an error."),
        finished_at=timezone.now(),
    )
