"""Batch actions: create a draft from checked input, confirm, cancel, retry, and run the steps.

Running: a batch is driven by one chain of Celery steps (`tasks.batch_step`). Each step
holds the batch's lease while it works, identified by `chain_token`, and says when the next
step is due. A step is short (a submission, a round of polls, or a time slice of concurrent
requests), never sleeps, and leaves everything it learnt in the database, so a worker killed
at any point loses nothing: the next step (or a watcher that takes the chain over once the
lease and the due step have lapsed) picks up from the item states.

Items: each one's upstream answer goes through the one metered call with
`store_atomically`, so its usage record and its result commit together; its record's
`source` is `batch-item:<id>:<attempt>` (unique), so a redelivered step can never write a
second record for the same attempt, and an item already done is never sent again.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import IO, Any

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max, Q, Sum
from django.utils import timezone

from playground.accounts.permissions import require_run_role
from playground.asyncutil import run_on_one_loop
from playground.batches.inputs import InputRules, ItemInput, LineError, Shared, csv_items, jsonl_items
from playground.batches.models import (
    Batch,
    BatchItem,
    BatchPath,
    BatchStatus,
    BatchSubmission,
    InputKind,
    ItemState,
    SubmissionState,
)
from playground.batches.selectors import batch_get
from playground.catalog.selectors import catalog_model_serving
from playground.providers.adapters import ChatAdapter, ChatRequest, adapter_for, queue_client_for
from playground.providers.adapters.finished import FinishedReply
from playground.providers.answer import AnswerCollector
from playground.providers.events import UpstreamError, request_at_fault
from playground.providers.http import UpstreamHTTPError
from playground.providers.kinds import ConnectionKind
from playground.providers.models import ProviderConnection
from playground.providers.queue import QueueClient, QueuePending, QueueResponse, RefusedItem, refused_item
from playground.providers.request_rules import request_capabilities
from playground.providers.selectors import connection_for_run
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.budgets import (
    BudgetExceeded,
    Reservation,
    budget_reconcile,
    budget_reserve,
    request_worst_case_cost,
)
from playground.usage.metered_call import MeteredCall
from playground.usage.metering import Outcome, UsageMeter, estimate_tokens
from playground.usage.models import RequestPath, UsageRecord, UsageStatus
from playground.usage.pricing import cost_for
from playground.usage.services import KnownCard, RequestContext, request_price_card, usage_record_create

logger = logging.getLogger(__name__)

MAX_REPORTED_ERRORS = 50
PREVIEW_ROWS = 5
INSERT_CHUNK = 1_000
OPEN_STATES = (ItemState.PENDING, ItemState.SUBMITTED)
SUBMISSIONS_PER_BATCH = 10
SUBMISSION_MIN_ITEMS = 100
RECORDS_PER_COMMIT = 100


class BatchInputInvalid(Exception):
    """The input has bad lines: nothing was stored. `errors` holds the first ones, in line order."""

    def __init__(self, errors: list[LineError], error_count: int) -> None:
        super().__init__(f"{error_count} bad line(s)")
        self.errors = errors
        self.error_count = error_count


class BatchNotFound(Exception):
    """No batch with that id in the user's teams (answered as 404)."""


# --- drafts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchInput:
    kind: str  # InputKind
    stream: IO[bytes]  # seekable: read once to check, once to store
    template: str = ""  # CSV only
    shared: Shared = field(default_factory=Shared)


@dataclass
class _Tally:
    count: int = 0
    prompt_chars: int = 0
    output_tokens: int = 0
    error_count: int = 0

    def __post_init__(self) -> None:
        self.errors: list[LineError] = []
        self.preview: list[dict[str, Any]] = []


def batch_draft_create(
    *,
    user: User,
    connection_id: int,
    model_id: str,
    source: BatchInput,
    name: str = "",
    from_conversation_id: int | None = None,
) -> Batch:
    """Check every line, then store the items as a draft (nothing runs until it is confirmed).

    Raises `ValidationError` (connection, model), `PermissionDenied` (viewers) or
    `BatchInputInvalid` with the bad lines; in every error case nothing is stored.
    """
    connection, model_id = connection_for_run(user=user, connection_id=connection_id, model_id=model_id)
    today = timezone.now().date()
    caps = request_capabilities(spec=connection.spec, model_id=model_id, day=today)
    rules = lambda: InputRules(parameters=connection.spec.parameters, caps=caps, shared=source.shared)  # noqa: E731
    tally = _check(_read(source, rules()))
    if tally.error_count or not tally.count:
        errors = tally.errors or [LineError(0, "The input has no items.")]
        raise BatchInputInvalid(errors, tally.error_count or 1)
    path, reason = batch_path_for(connection=connection, model_id=model_id, day=today)
    source.stream.seek(0)
    with transaction.atomic():
        batch = Batch(
            team_id=connection.team_id,
            created_by=user,
            connection=connection,
            model_id=model_id,
            name=name.strip()[:200],
            input_kind=source.kind,
            from_conversation_id=from_conversation_id,
            path=path,
            path_reason=reason,
            item_count=tally.count,
            preview=tally.preview,
        )
        batch.estimate = batch_estimate(
            context=_draft_context(batch, today),
            prompt_tokens=estimate_tokens(tally.prompt_chars),
            output_tokens=tally.output_tokens,
        )
        batch.save()
        _items_store(batch, _read(source, rules()))
    return batch


def _read(source: BatchInput, rules: InputRules) -> Iterator[ItemInput | LineError]:
    if source.kind == InputKind.CSV:
        return csv_items(source.stream, template=source.template, rules=rules)
    return jsonl_items(source.stream, rules)


def _check(results: Iterable[ItemInput | LineError]) -> _Tally:
    tally = _Tally()
    for result in results:
        if isinstance(result, LineError):
            tally.error_count += 1
            if len(tally.errors) < MAX_REPORTED_ERRORS:
                tally.errors.append(result)
            continue
        tally.count += 1
        tally.prompt_chars += result.prompt_chars()
        tally.output_tokens += result.body.get("max_tokens") or settings.BATCH_ESTIMATE_OUTPUT_TOKENS
        if len(tally.preview) < PREVIEW_ROWS:
            tally.preview.append(_preview_row(result))
    return tally


def _preview_row(item: ItemInput) -> dict[str, Any]:
    messages = item.body["messages"]
    last = messages[-1].get("content") if messages else ""
    text = last if isinstance(last, str) else "(content parts)"
    options = {
        key: value for key, value in item.body.items() if key not in ("messages", "tools", "response_format")
    }
    return {
        "line": item.line,
        "external_reference": item.external_reference,
        "messages": len(messages),
        "prompt": text[:300],
        "options": ", ".join(f"{key}={value}" for key, value in options.items()),
        "tools": len(item.body.get("tools") or []),
        "response_format": (item.body.get("response_format") or {}).get("type", ""),
    }


def _items_store(batch: Batch, results: Iterable[ItemInput | LineError]) -> None:
    chunk: list[BatchItem] = []
    index = 0
    for result in results:
        if isinstance(result, LineError):  # the input changed between the two reads
            raise BatchInputInvalid([result], 1)
        chunk.append(
            BatchItem(
                batch=batch,
                index=index,
                line=result.line,
                external_reference=result.external_reference,
                request=result.body,
            )
        )
        index += 1
        if len(chunk) >= INSERT_CHUNK:
            BatchItem.objects.bulk_create(chunk)
            chunk = []
    BatchItem.objects.bulk_create(chunk)


def batch_path_for(*, connection: ProviderConnection, model_id: str, day: dt.date) -> tuple[str, str]:
    """Where a batch runs, and why (the detail page shows the reason)."""
    concurrency = settings.BATCH_CONCURRENCY
    spread = f"its items run as separate requests, {concurrency} at a time."
    if not connection.spec.queue:
        return BatchPath.CONCURRENT, f"{connection.spec.label} connections have no batch queue: {spread}"
    if connection.kind == ConnectionKind.ENGINE:
        return BatchPath.QUEUE, "The embedded engine serves Workers AI's batch queue (?queueRequest=true)."
    model = catalog_model_serving(model_id=model_id, day=day)
    if model is None:
        return (
            BatchPath.CONCURRENT,
            f"The catalogue does not know {model_id}, so it is not sent to the queue: {spread}",
        )
    if not model.supports_batch:
        return BatchPath.CONCURRENT, f"{model.display_name} does not take Workers AI's batch queue: {spread}"
    return BatchPath.QUEUE, f"{model.display_name} takes Workers AI's batch queue (?queueRequest=true)."


def batch_estimate(*, context: RequestContext, prompt_tokens: int, output_tokens: int) -> dict[str, Any]:
    """Estimated tokens x the card that will price the items (the team's override when it has
    one, else the global card, in force on `context.priced_on`), with and without the assumed
    share of cached prompt tokens. Strings, to keep JSON exact."""
    share = Decimal(str(settings.BATCH_ESTIMATE_CACHE_SHARE))
    known = request_price_card(context=context)
    card = known.card
    usage = NormalizedUsage(prompt_tokens=prompt_tokens, completion_tokens=output_tokens)
    plain = cost_for(usage=usage, card=card)
    cached = cost_for(usage=replace(usage, cached_tokens=int(prompt_tokens * share)), card=card)
    return {
        "prompt_tokens": prompt_tokens,
        "output_tokens": output_tokens,
        "cache_share": str(share),
        "cost": str(plain.total) if card else None,
        "cost_with_cache": str(cached.total) if card else None,
        "price_card": known.label,
        "price_card_override": bool(card and card.is_override),
        "priced_on": str(context.priced_on),
        "output_assumption": settings.BATCH_ESTIMATE_OUTPUT_TOKENS,
    }


def batch_estimate_today(*, batch: Batch) -> dict[str, Any]:
    """A draft's estimate as it would be priced if confirmed now: its tokens priced by the card
    in force today (a draft may wait past a price change, or past midnight). A confirmed
    batch's estimate is the one it was confirmed with."""
    estimate = batch.estimate or {}
    if batch.status != BatchStatus.DRAFT or "prompt_tokens" not in estimate:
        return estimate
    today = timezone.now().date()
    return batch_estimate(
        context=_draft_context(batch, today),
        prompt_tokens=estimate["prompt_tokens"],
        output_tokens=estimate["output_tokens"],
    )


# --- user actions -----------------------------------------------------------------------


def batch_confirm(*, user: User, batch_id: int) -> Batch:
    """Queue a draft: it is submitted now, and its items are priced by today's cards."""
    batch = _batch_for_run(user=user, batch_id=batch_id)
    if batch.status != BatchStatus.DRAFT:
        return batch
    now = timezone.now()
    with transaction.atomic():
        batch.status = BatchStatus.RUNNING
        batch.submitted_at = now
        batch.priced_on = now.date()
        batch.save(update_fields=["status", "submitted_at", "priced_on"])
        _start_chain(batch)
    return batch


def batch_discard(*, user: User, batch_id: int) -> None:
    batch = _batch_for_run(user=user, batch_id=batch_id)
    if batch.status == BatchStatus.DRAFT:
        batch.delete()


def batch_cancel(*, user: User, batch_id: int) -> Batch:
    """Stop the pending items. Items already at the provider finish and are recorded (they are billed)."""
    batch = _batch_for_run(user=user, batch_id=batch_id)
    with transaction.atomic():
        if batch.status == BatchStatus.DRAFT:
            batch.delete()
            return batch
        Batch.objects.filter(pk=batch.pk, status=BatchStatus.RUNNING).update(status=BatchStatus.CANCELLED)
        batch.items.filter(state=ItemState.PENDING).update(
            state=ItemState.CANCELLED, error="Cancelled before it was sent.", finished_at=timezone.now()
        )
        _finish_if_complete(batch.pk)
    batch.refresh_from_db()
    return batch


def batch_retry_failed(*, user: User, batch_id: int) -> int:
    """Send the failed items again, each as a new attempt (a new usage record). Returns how many.

    Items the provider refused for their own input are left failed: the same request would be
    refused again (the page says so, and which lines to fix).
    """
    batch = _batch_for_run(user=user, batch_id=batch_id)
    if batch.status == BatchStatus.DRAFT:
        return 0
    with transaction.atomic():
        retryable = batch.items.filter(state=ItemState.FAILED, input_refused=False)
        failed = list(retryable.values_list("pk", "attempt"))
        for pk, attempt in failed:
            BatchItem.objects.filter(pk=pk, state=ItemState.FAILED).update(
                state=ItemState.PENDING,
                attempt=attempt + 1,
                submission=None,
                position=None,
                response=None,
                error="",
                error_code="",
                usage_record=None,
                finished_at=None,
            )
        if failed:
            Batch.objects.filter(pk=batch.pk).update(status=BatchStatus.RUNNING, finished_at=None)
            batch.refresh_from_db()
            _start_chain(batch)
    return len(failed)


def _batch_for_run(*, user: User, batch_id: int) -> Batch:
    batch = batch_get(user=user, batch_id=batch_id)
    if batch is None:
        raise BatchNotFound(batch_id)
    require_run_role(user=user, team_id=batch.team_id)
    return batch


# --- the chain: ownership, scheduling, recovery ----------------------------------------


def _start_chain(batch: Batch) -> str:
    """A new chain owns the batch from now on (any older chain's steps find a stale token and stop)."""
    token = uuid.uuid4().hex
    now = timezone.now()
    Batch.objects.filter(pk=batch.pk).update(chain_token=token, next_step_at=now, heartbeat_at=now)
    batch_id = batch.pk
    transaction.on_commit(lambda: _enqueue_step(batch_id, token, 0))
    return token


def _enqueue_step(batch_id: int, token: str, countdown: float) -> None:
    from playground.batches.tasks import batch_step  # tasks import services, not the other way at load

    batch_step.apply_async((batch_id, token), countdown=countdown)


def _lease() -> dt.timedelta:
    return dt.timedelta(seconds=settings.BATCH_LEASE_SECONDS)


def _acquire(batch_id: int, token: str) -> bool:
    now = timezone.now()
    return (
        Batch.objects.filter(pk=batch_id, chain_token=token, finished_at__isnull=True)
        .exclude(status=BatchStatus.DRAFT)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(lease_until=now + _lease(), heartbeat_at=now)
        == 1
    )


def _renew(batch_id: int, token: str) -> bool:
    now = timezone.now()
    return (
        Batch.objects.filter(pk=batch_id, chain_token=token).update(
            lease_until=now + _lease(), heartbeat_at=now
        )
        == 1
    )


def _release(batch_id: int, token: str, countdown: float | None) -> None:
    now = timezone.now()
    next_at = None if countdown is None else now + dt.timedelta(seconds=countdown)
    Batch.objects.filter(pk=batch_id, chain_token=token).update(
        lease_until=None, heartbeat_at=now, next_step_at=next_at
    )


def batch_step_run(*, batch_id: int, token: str) -> float | None:
    """Run one step if this chain owns the batch; the seconds until the next step, or None (no more)."""
    if not _acquire(batch_id, token):
        return None
    countdown: float | None
    try:
        batch = Batch.objects.select_related("connection").get(pk=batch_id)
        if batch.connection is None:
            _fail_open_items(batch, "The batch's connection was deleted.", code="no_connection")
            countdown = None
        elif batch.path == BatchPath.QUEUE:
            countdown = run_on_one_loop(_queue_step, batch, token)
        else:
            countdown = run_on_one_loop(_concurrent_step, batch, token)
        if _finish_if_complete(batch_id):
            countdown = None
    except Exception:
        logger.exception(
            "batch %s: a step failed; the next one runs in %s s", batch_id, settings.BATCH_STEP_RETRY_SECONDS
        )
        countdown = settings.BATCH_STEP_RETRY_SECONDS
    _release(batch_id, token, countdown)
    return countdown


def batch_watch(*, batch_id: int, seen: str) -> float | None:
    """A watchdog: if the batch's chain shows no sign of life (no heartbeat since `seen`, the
    lease lapsed and the due step is overdue by the grace period), a new chain takes over.

    Returns the seconds until it should look again, or None (alive, finished, or taken over).
    """
    batch = (
        Batch.objects.filter(pk=batch_id, finished_at__isnull=True).exclude(status=BatchStatus.DRAFT).first()
    )
    if batch is None or (batch.heartbeat_at and batch.heartbeat_at.isoformat() != seen):
        return None
    now = timezone.now()
    due = _stalled_after(batch)
    if now < due:
        return (due - now).total_seconds() + 0.5
    with transaction.atomic():
        _start_chain(batch)
    logger.warning("batch %s: its chain stalled; a new one took over", batch_id)
    return None


def batch_nudge_if_stalled(*, batch: Batch) -> bool:
    """Take the chain over when it has visibly stalled (the detail page asks while it is watched)."""
    if batch.finished_at is not None or batch.status == BatchStatus.DRAFT:
        return False
    if timezone.now() < _stalled_after(batch):
        return False
    with transaction.atomic():
        _start_chain(batch)
    return True


def _stalled_after(batch: Batch) -> dt.datetime:
    grace = dt.timedelta(seconds=settings.BATCH_STALL_GRACE_SECONDS)
    marks = [mark for mark in (batch.lease_until, batch.next_step_at, batch.heartbeat_at) if mark is not None]
    return (max(marks) if marks else timezone.now()) + grace


def batches_unfinished() -> list[tuple[int, str]]:
    """(id, heartbeat) of every batch still running: what a starting worker watches."""
    rows = Batch.objects.filter(finished_at__isnull=True).exclude(status=BatchStatus.DRAFT)
    return [(pk, beat.isoformat() if beat else "") for pk, beat in rows.values_list("pk", "heartbeat_at")]


def _finish_if_complete(batch_id: int) -> bool:
    if BatchItem.objects.filter(batch_id=batch_id, state__in=OPEN_STATES).exists():
        return False
    now = timezone.now()
    Batch.objects.filter(pk=batch_id, finished_at__isnull=True).update(finished_at=now)
    Batch.objects.filter(pk=batch_id, status=BatchStatus.RUNNING).update(status=BatchStatus.DONE)
    return True


def _fail_open_items(batch: Batch, reason: str, *, code: str, items: Any = None) -> int:
    queryset = items if items is not None else batch.items.filter(state__in=OPEN_STATES)
    return queryset.update(
        state=ItemState.FAILED, error=reason, error_code=code[:40], finished_at=timezone.now()
    )


# --- one item's answer, metered and stored -----------------------------------------------


def _chat_request(batch: Batch, item: BatchItem) -> ChatRequest:
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
    )


def _context(batch: Batch, item: BatchItem | None, card: KnownCard | None = None) -> RequestContext:
    return RequestContext(
        team_id=batch.team_id,
        user_id=batch.created_by_id,
        connection_id=batch.connection_id,
        model_id=batch.model_id,
        streamed=False,
        path=RequestPath.BATCH,
        source=item.source if item is not None else "",
        priced_on=batch.priced_on,
        price_card=card,
    )


def _draft_context(batch: Batch, day: dt.date) -> RequestContext:
    """The context a draft's items will be recorded under if it is confirmed on `day`."""
    return replace(_context(batch, None), priced_on=day)


@dataclass(frozen=True)
class ItemTerms:
    """What every item of a batch is checked and priced by, looked up once per step, not per item."""

    context_window: int | None  # the model's, when the catalogue knows it
    card: KnownCard  # the card of the day the batch was submitted


def _item_terms(batch: Batch) -> ItemTerms:
    model = catalog_model_serving(model_id=batch.model_id, day=batch.priced_on or timezone.now().date())
    return ItemTerms(
        context_window=model.context_window if model else None,
        card=request_price_card(context=_context(batch, None)),
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


async def _metered_item(
    batch: Batch,
    item: BatchItem,
    adapter: ChatAdapter,
    terms: ItemTerms,
    *,
    budget_held: bool = False,
) -> None:
    """Send (or replay) one item through the metered call; its record and result commit together."""
    if await UsageRecord.objects.filter(source=item.source).aexists():
        # Only possible if a record was written outside this path; never send it twice.
        await sync_to_async(_item_from_existing_record)(item)
        return
    answer = AnswerCollector()
    call = MeteredCall(
        adapter=adapter,
        request=_chat_request(batch, item),
        context=_context(batch, item, terms.card),
        context_window=terms.context_window,
        after_record=lambda record, outcome: _item_result(item, answer, record, outcome),
        store_atomically=True,
        budget_held=budget_held,
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


# --- the concurrency path ----------------------------------------------------------------


def _concurrent_step(batch: Batch, token: str) -> float | None:
    """Run open items, `BATCH_CONCURRENCY` at a time, for one time slice; 0: continue at once."""
    assert batch.connection is not None
    try:
        adapter = adapter_for(batch.connection)
    except ValidationError as exc:
        _fail_open_items(batch, " ".join(exc.messages), code="connection_unusable")
        return None
    more = async_to_sync(_run_concurrently)(batch, token, adapter, _item_terms(batch))
    return 0 if more else None


async def _run_concurrently(batch: Batch, token: str, adapter: ChatAdapter, terms: ItemTerms) -> bool:
    """True when open items remain after the slice (and this chain still owns the batch)."""
    deadline = time.monotonic() + settings.BATCH_STEP_SECONDS
    slots = asyncio.Semaphore(settings.BATCH_CONCURRENCY)
    lease = {"owned": True}
    running: set[asyncio.Task[None]] = set()

    async def keep_lease() -> None:
        while lease["owned"]:
            await asyncio.sleep(settings.BATCH_LEASE_SECONDS / 3)
            lease["owned"] = await sync_to_async(_renew)(batch.pk, token)

    async def one(item: BatchItem) -> None:
        try:
            if await sync_to_async(_mark_submitted)(item):
                await _metered_item(batch, item, adapter, terms)
        finally:
            slots.release()

    def go_on() -> bool:
        return lease["owned"] and time.monotonic() < deadline

    keeper = asyncio.create_task(keep_lease())
    after = -1
    try:
        while go_on() and (page := await sync_to_async(_open_items_after)(batch.pk, after)):
            for item in page:
                await slots.acquire()
                if not go_on():
                    slots.release()
                    break
                task = asyncio.create_task(one(item))
                running.add(task)
                task.add_done_callback(running.discard)
                after = item.index
        for failure in await asyncio.gather(*running, return_exceptions=True):
            if isinstance(failure, BaseException):  # the item stays open: the next step sends it again
                logger.error("batch %s: an item failed unexpectedly", batch.pk, exc_info=failure)
    finally:
        keeper.cancel()
    return (
        lease["owned"] and await BatchItem.objects.filter(batch_id=batch.pk, state__in=OPEN_STATES).aexists()
    )


def _open_items_after(batch_id: int, index: int) -> list[BatchItem]:
    return list(
        BatchItem.objects.filter(batch_id=batch_id, state__in=OPEN_STATES, index__gt=index).order_by("index")[
            :200
        ]
    )


def _mark_submitted(item: BatchItem) -> bool:
    """pending (or left submitted by a dead step) -> submitted; False if it was cancelled meanwhile."""
    return (
        BatchItem.objects.filter(pk=item.pk, attempt=item.attempt, state__in=OPEN_STATES).update(
            state=ItemState.SUBMITTED
        )
        == 1
    )


# --- the queue path ------------------------------------------------------------------------


@dataclass(frozen=True)
class SizedItem:
    pk: int
    size: int


def chunk_by_size(items: Iterable[SizedItem], *, max_bytes: int, max_items: int) -> Iterator[list[SizedItem]]:
    """Consecutive groups whose `{"requests": [...]}` body stays under `max_bytes`."""
    envelope = len(b'{"requests":[]}')
    chunk: list[SizedItem] = []
    size = envelope
    for item in items:
        added = item.size + (1 if chunk else 0)  # the comma
        if chunk and (size + added >= max_bytes or len(chunk) >= max_items):
            yield chunk
            chunk, size, added = [], envelope, item.size
        if size + added >= max_bytes:
            raise ValueError(
                f"item {item.pk} alone is {item.size} bytes, over the {max_bytes}-byte submission limit"
            )
        chunk.append(item)
        size += added
    if chunk:
        yield chunk


def _queue_body(adapter: ChatAdapter, batch: Batch, item: BatchItem) -> dict[str, Any]:
    payload = adapter.payload(_chat_request(batch, item))  # type: ignore[attr-defined]
    return {**payload, "external_reference": queue_reference(item)}


def queue_reference(item: BatchItem) -> str:
    """What we send as `external_reference`: names the item and attempt (the user's own stays here)."""
    return f"item-{item.pk}-{item.attempt}"


def poll_delay(polls: int, *, waited: float | None = None) -> float:
    """Seconds before poll number `polls + 1`: growing by half each time, up to the cap (which is
    kept below the broker's visibility timeout, so a scheduled poll is never redelivered early).

    `waited`: seconds since the submission went out. The wait is also kept under a tenth of
    that (but not under the first wait), so results that arrive are noticed within about 10 %
    of the time they took, however the backoff has grown.
    """
    first, cap = settings.BATCH_POLL_FIRST_SECONDS, settings.BATCH_POLL_MAX_SECONDS
    delay = min(cap, first * 1.5**polls)
    if waited is not None:
        delay = min(delay, max(first, waited / 10))
    return float(delay)


def _queue_step(batch: Batch, token: str) -> float | None:
    assert batch.connection is not None
    try:
        adapter = adapter_for(batch.connection)
        client = queue_client_for(batch.connection)
    except ValidationError as exc:
        _fail_open_items(batch, " ".join(exc.messages), code="connection_unusable")
        return None
    assert client is not None
    _submissions_form(batch, adapter)
    now = timezone.now()
    for submission in batch.submissions.filter(state=SubmissionState.SUBMITTING).order_by("id"):
        if submission.next_poll_at is None or submission.next_poll_at <= now:
            _submission_send(batch, submission, client, adapter)
            _renew(batch.pk, token)
    due = batch.submissions.filter(state=SubmissionState.POLLING, next_poll_at__lte=timezone.now()).order_by(
        "id"
    )
    for submission in due[: settings.BATCH_POLLS_PER_STEP]:
        _submission_poll(batch, submission, client, adapter, token)
        _renew(batch.pk, token)
    waiting = batch.submissions.filter(state__in=(SubmissionState.SUBMITTING, SubmissionState.POLLING))
    next_at = min((s.next_poll_at or timezone.now() for s in waiting), default=None)
    if next_at is None:
        return None
    return max(0.0, (next_at - timezone.now()).total_seconds())


def submission_items(item_count: int) -> int:
    """Items per submission: about a tenth of the batch, within [SUBMISSION_MIN_ITEMS, the setting].

    Several submissions let the results of one be recorded while the queue runs the next,
    so only the last one's recording is left when the queue finishes (at 500, a 1,000-item
    batch on the engine ended with 500 records written one after another, ~10 s); a floor
    and the cap keep the number of submissions, each polled on its own, small for big batches.
    """
    share = -(-item_count // SUBMISSIONS_PER_BATCH)
    return max(1, min(settings.BATCH_SUBMISSION_MAX_ITEMS, max(SUBMISSION_MIN_ITEMS, share)))


def _submissions_form(batch: Batch, adapter: ChatAdapter) -> None:
    """Group the pending items nobody has submitted into submissions under the size limit."""
    unsent = batch.items.filter(state=ItemState.PENDING, submission__isnull=True).order_by("index")
    sized = (
        SizedItem(item.pk, len(_json_bytes(_queue_body(adapter, batch, item))))
        for item in unsent.iterator(chunk_size=INSERT_CHUNK)
    )
    groups = chunk_by_size(
        sized, max_bytes=settings.BATCH_SUBMISSION_MAX_BYTES, max_items=submission_items(batch.item_count)
    )
    for group in groups:
        with transaction.atomic():
            submission = BatchSubmission.objects.create(
                batch=batch, item_count=len(group), size_bytes=sum(item.size for item in group) + 16
            )
            for position, item in enumerate(group):
                BatchItem.objects.filter(pk=item.pk, state=ItemState.PENDING).update(
                    submission=submission, position=position
                )


def _submission_send(
    batch: Batch, submission: BatchSubmission, client: QueueClient, adapter: ChatAdapter
) -> None:
    items = list(submission.items.filter(state=ItemState.PENDING).order_by("position"))
    if not items:  # all cancelled before it went out
        BatchSubmission.objects.filter(pk=submission.pk).update(state=SubmissionState.DONE)
        return
    bodies = [_queue_body(adapter, batch, item) for item in items]
    if submission.budget_reservation_id is None:
        card = _item_terms(batch).card  # the card that will price the items' records
        amount = sum(
            (
                request_worst_case_cost(
                    request=_chat_request(batch, item),
                    team_id=batch.team_id,
                    model_id=batch.model_id,
                    card=card,
                )
                for item in items
            ),
            Decimal(0),
        )
        try:
            reservation = budget_reserve(
                team_id=batch.team_id,
                user_id=batch.created_by_id,
                amount=amount,
                card=card,
                label=f"batch-submission:{submission.pk}",
            )
        except BudgetExceeded as exc:
            _submission_refused(batch, submission, items, f"Not sent: {exc}", code=exc.code)
            return
        BatchSubmission.objects.filter(pk=submission.pk).update(budget_reservation_id=reservation.id)
        submission.budget_reservation_id = reservation.id
    # Positions are re-numbered if some items were cancelled: `id` is the index in what is sent.
    for position, item in enumerate(items):
        if item.position != position:
            BatchItem.objects.filter(pk=item.pk).update(position=position)
    try:
        request_id = async_to_sync(client.submit)(model=batch.model_id, requests=bodies)
    except UpstreamHTTPError as exc:
        attempts = submission.submit_attempts + 1
        if exc.retryable and attempts < settings.BATCH_SUBMIT_MAX_ATTEMPTS:
            wait = max(poll_delay(attempts), exc.retry_after or 0)
            BatchSubmission.objects.filter(pk=submission.pk).update(
                submit_attempts=attempts,
                error=exc.message,
                next_poll_at=timezone.now() + dt.timedelta(seconds=wait),
            )
            return
        refused = refused_item(exc, count=len(items))
        if refused is not None:
            _submission_drop_item(submission, items[refused.position], refused, exc, attempts)
            return
        reason = f"The provider refused the submission: {exc.message}"
        with transaction.atomic():
            BatchSubmission.objects.filter(pk=submission.pk).update(
                state=SubmissionState.FAILED, submit_attempts=attempts, error=reason
            )
            _fail_open_items(
                batch,
                reason,
                code=exc.code or "submit_failed",
                items=submission.items.filter(state__in=OPEN_STATES),
            )
        return
    now = timezone.now()
    with transaction.atomic():
        BatchSubmission.objects.filter(pk=submission.pk).update(
            state=SubmissionState.POLLING,
            request_id=request_id[:200],
            submit_attempts=submission.submit_attempts + 1,
            submitted_at=now,
            next_poll_at=now + dt.timedelta(seconds=poll_delay(0)),
            error="",
        )
        submission.items.filter(state=ItemState.PENDING).update(state=ItemState.SUBMITTED)


def _submission_drop_item(
    submission: BatchSubmission, item: BatchItem, refused: RefusedItem, exc: UpstreamHTTPError, attempts: int
) -> None:
    """The provider refused the submission because of one item: that item fails with its own
    error (its input is at fault: retrying it would fail again), and the others go again at
    once without it (the step that sends it renumbers them). No item carries another's error.
    A submission left with no item is done.
    """
    with transaction.atomic():
        BatchItem.objects.filter(pk=item.pk, state__in=OPEN_STATES).update(
            state=ItemState.FAILED,
            error=f"The provider refused this item: {refused.reason}",
            error_code=(exc.code or "invalid_input")[:40],
            input_refused=True,
            finished_at=timezone.now(),
        )
        left = submission.items.filter(state=ItemState.PENDING).exists()
        BatchSubmission.objects.filter(pk=submission.pk).update(
            state=SubmissionState.SUBMITTING if left else SubmissionState.DONE,
            submit_attempts=attempts,
            error=f"Sent again without item {item.index} (line {item.line}), which the provider refused.",
            next_poll_at=timezone.now(),
        )
    if not left:
        _submission_settle_budget(submission)


def _submission_poll(
    batch: Batch, submission: BatchSubmission, client: QueueClient, adapter: ChatAdapter, token: str
) -> None:
    now = timezone.now()
    open_items = submission.items.filter(state__in=OPEN_STATES)
    expiry = dt.timedelta(seconds=settings.BATCH_RESULT_EXPIRY_SECONDS)
    if submission.submitted_at and now - submission.submitted_at > expiry:
        reason = (
            f"No result arrived within {_duration(expiry)} of submitting "
            f"(request_id {submission.request_id}); the provider may have dropped it. Retry the failed items."
        )
        _submission_fail(batch, submission, reason, code="expired")
        return
    try:
        reply = async_to_sync(client.poll)(model=batch.model_id, request_id=submission.request_id)
    except UpstreamHTTPError as exc:
        if exc.status == 404:
            reason = f"The provider does not know request_id {submission.request_id}: {exc.message}"
            _submission_fail(batch, submission, reason, code="unknown_request_id")
            return
        errors = submission.poll_errors + 1
        if exc.retryable and errors < settings.BATCH_POLL_MAX_ERRORS:
            wait = max(poll_delay(submission.polls + errors), exc.retry_after or 0)
            BatchSubmission.objects.filter(pk=submission.pk).update(
                poll_errors=errors, error=exc.message, next_poll_at=now + dt.timedelta(seconds=wait)
            )
            return
        _submission_fail(
            batch,
            submission,
            f"Polling for the results failed: {exc.message}",
            code=exc.code or "poll_failed",
        )
        return
    if isinstance(reply, QueuePending):
        since = _last_news(batch, submission)
        waited = (now - since).total_seconds() if since else None
        BatchSubmission.objects.filter(pk=submission.pk).update(
            polls=submission.polls + 1,
            poll_errors=0,
            next_poll_at=now + dt.timedelta(seconds=poll_delay(submission.polls + 1, waited=waited)),
        )
        return
    items = list(open_items)
    matched = match_responses(reply.responses, items)
    turnaround_ms = _ms_since(submission.submitted_at) if submission.submitted_at else None
    _record_results(batch, submission, matched, adapter, client.token, token, turnaround_ms=turnaround_ms)
    missing = submission.items.filter(state__in=OPEN_STATES)
    with transaction.atomic():
        _fail_open_items(
            batch, "The provider's results did not include this item.", code="missing_result", items=missing
        )
        BatchSubmission.objects.filter(pk=submission.pk).update(
            state=SubmissionState.DONE, polls=submission.polls + 1
        )
    _poll_next_oldest_soon(batch)
    _submission_settle_budget(submission)


def _poll_next_oldest_soon(batch: Batch) -> None:
    """Bring forward the poll of the submission that is now the oldest still out.

    Until now it was paced by the plain backoff (see `_last_news`), so its next poll may be
    up to the cap away; an in-order queue is working on it already, and with the last one
    the whole batch would wait out that backoff after the queue had finished (5-14 s of a
    110 s run on 1,000 items, measured). From here on `_last_news` paces it.
    """
    oldest = (
        batch.submissions.filter(state__in=(SubmissionState.SUBMITTING, SubmissionState.POLLING))
        .order_by("id")
        .first()
    )
    if oldest is None or oldest.state != SubmissionState.POLLING:
        return
    soon = timezone.now() + dt.timedelta(seconds=poll_delay(0))
    BatchSubmission.objects.filter(pk=oldest.pk, next_poll_at__gt=soon).update(next_poll_at=soon)


def _last_news(batch: Batch, submission: BatchSubmission) -> dt.datetime | None:
    """When the wait for `submission`'s results started, for pacing its polls; None: no pacing
    but the plain backoff (up to its cap).

    For the oldest submission of the batch still out: its submission time or, if later, the
    time its batch's last results came in. A queue works through a batch's submissions
    roughly in the order they were sent, so the oldest one's results are the next to come
    and are due about as long after the previous ones as those took. Measured from the
    submission alone, the last of many would be polled only every tenth of the whole run
    (15 s on 1,000 items), and the run would wait on it.

    Later submissions (None) cannot finish before it on such a queue, so they keep the plain
    backoff: polled each second as the oldest was, ten submissions cost ten polls a second
    for nothing, on the cores the queue runs on. A provider that finishes out of order is
    still noticed within the cap, and the next oldest is paced again at its next poll.
    """
    since = submission.submitted_at
    older_open = batch.submissions.filter(
        pk__lt=submission.pk, state__in=(SubmissionState.SUBMITTING, SubmissionState.POLLING)
    )
    if since is None or older_open.exists():
        return None
    latest = BatchItem.objects.filter(batch_id=batch.pk, submission__state=SubmissionState.DONE).aggregate(
        latest=Max("finished_at")
    )["latest"]
    return max(since, latest) if latest else since


def _submission_fail(batch: Batch, submission: BatchSubmission, reason: str, *, code: str) -> None:
    with transaction.atomic():
        BatchSubmission.objects.filter(pk=submission.pk).update(state=SubmissionState.FAILED, error=reason)
        _fail_open_items(batch, reason, code=code, items=submission.items.filter(state__in=OPEN_STATES))
    _submission_settle_budget(submission)


def _submission_refused(
    batch: Batch, submission: BatchSubmission, items: list[BatchItem], reason: str, *, code: str
) -> None:
    """A submission the budget refused before sending: like a refused chat turn, each item
    fails with the reason and leaves a rejected record of cost 0."""
    meter = UsageMeter(prompt_chars=0)
    meter.observe(UpstreamError(reason, code=code))
    outcome = meter.outcome(rejected_reason=reason)
    card = _item_terms(batch).card
    with transaction.atomic():
        BatchSubmission.objects.filter(pk=submission.pk).update(state=SubmissionState.FAILED, error=reason)
        for item in items:
            record = usage_record_create(context=_context(batch, item, card), outcome=outcome)
            BatchItem.objects.filter(pk=item.pk, state__in=OPEN_STATES).update(
                state=ItemState.FAILED,
                error=reason,
                error_code=code,
                usage_record=record,
                finished_at=timezone.now(),
            )


def _submission_settle_budget(submission: BatchSubmission) -> None:
    """The submission's hold becomes what its items' records cost (0 for items without one)."""
    if submission.budget_reservation_id is None:
        return
    spent = UsageRecord.objects.filter(batch_item__submission_id=submission.pk).aggregate(
        total=Sum("total_cost")
    )
    reservation = Reservation(id=submission.budget_reservation_id, amount=Decimal(0))
    try:
        budget_reconcile(reservation=reservation, actual=spent["total"] or Decimal(0))
    except Exception:  # left to the budgets' sweep
        logger.exception("batch submission %s: its budget could not be settled", submission.pk)


def match_responses(
    responses: Sequence[QueueResponse], items: Sequence[BatchItem]
) -> list[tuple[BatchItem, QueueResponse]]:
    """Pair each response with its item, whatever order they came in.

    By `external_reference` first (we send one naming the item and attempt), else by `id`
    (the item's position in the submission). A response for no known item, or a second one
    for an item already paired, is ignored.
    """
    by_reference = {queue_reference(item): item for item in items}
    by_position = {item.position: item for item in items if item.position is not None}
    paired: dict[int, tuple[BatchItem, QueueResponse]] = {}
    for response in responses:
        item = by_reference.get(response.external_reference or "")
        if item is None and response.id is not None:
            item = by_position.get(response.id)
        if item is None:
            logger.warning("a queued result matched no item (id %s)", response.id)
            continue
        paired.setdefault(item.pk, (item, response))
    return list(paired.values())


def _record_results(
    batch: Batch,
    submission: BatchSubmission,
    matched: list[tuple[BatchItem, QueueResponse]],
    sent_by: ChatAdapter,
    secret: str,
    token: str,
    *,
    turnaround_ms: int | None,
) -> None:
    """Each result replayed through the metered call, one record per item; the lease is kept.
    Each record's latency is the submission's turnaround (submitted to polled), and it has
    no TTFT: the replay's own pace would say 0-1 ms for answers that waited in a queue.

    Items commit together, up to `RECORDS_PER_COMMIT` at a time (each item's record and result
    still in one savepoint of their own): a commit per item cost ~13 ms on SQLite, more than the
    rest of the item's recording. A worker killed mid-way loses only the uncommitted ones, which
    the next poll records again under the same sources. A transaction is also kept under a third
    of the lease, which is renewed between them.
    """
    terms = _item_terms(batch)
    results = iter(matched)
    more = True
    while more:
        with transaction.atomic():
            more = async_to_sync(_replay_results)(
                batch, submission, results, sent_by, secret, terms, turnaround_ms
            )
        _renew(batch.pk, token)


async def _replay_results(
    batch: Batch,
    submission: BatchSubmission,
    results: Iterator[tuple[BatchItem, QueueResponse]],
    sent_by: ChatAdapter,
    secret: str,
    terms: ItemTerms,
    turnaround_ms: int | None,
) -> bool:
    """Record results taken from `results` until a transaction's worth; False once none are left."""
    started = time.monotonic()
    for count, (item, response) in enumerate(results, start=1):
        reply = FinishedReply(
            result=response.result,
            success=response.success,
            sent_by=sent_by,
            request_id=submission.request_id,
            token=secret,
            turnaround_ms=turnaround_ms,
        )
        await _metered_item(batch, item, reply, terms, budget_held=True)
        if count >= RECORDS_PER_COMMIT or time.monotonic() - started > settings.BATCH_LEASE_SECONDS / 3:
            return True
    return False


def _ms_since(at: dt.datetime) -> int:
    return round((timezone.now() - at).total_seconds() * 1000)


def _json_bytes(value: Any) -> bytes:
    import json

    return json.dumps(value, separators=(",", ":")).encode()


def _duration(delta: dt.timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
