"""The queue path: a step groups pending items into submissions, sends them and polls the due ones.

Queued items go upstream outside the metered call, so a team's upstream redaction (issue 37) is
applied here too: each item's text is redacted with the salt its record will be written with
(`usage.redaction_salt`, from the item's attempt), so when its result is recorded through the
metered call the record's placeholders are those the model read. An item the redactor fails on
is not sent: it fails with the metered call's reason.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from playground.accounts.models import Team
from playground.batches.models import Batch, BatchItem, BatchSubmission, ItemState, SubmissionState
from playground.batches.services.chain import OPEN_STATES, fail_open_items, lease_renew
from playground.batches.services.metered_item import chat_request, item_terms, record_context
from playground.batches.services.queue_results import (
    poll_delay,
    queue_reference,
    submission_poll,
    submission_settle_budget,
)
from playground.providers.adapters import ChatAdapter, adapter_for, queue_client_for
from playground.providers.events import UpstreamError
from playground.providers.http import UpstreamHTTPError
from playground.providers.queue import QueueClient, RefusedItem, refused_item
from playground.usage.budgets import BudgetExceeded, budget_reserve, request_worst_case_cost
from playground.usage.calls.upstream import NOT_SENT
from playground.usage.metering import UsageMeter
from playground.usage.records import usage_record_create
from playground.usage.redaction_salt import context_redaction
from playground.usage.storage import REDACTOR_ERROR

logger = logging.getLogger(__name__)

READ_CHUNK = 1_000  # items read per query while forming submissions
SUBMISSIONS_PER_BATCH = 10
SUBMISSION_MIN_ITEMS = 100


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


def _queue_body(adapter: ChatAdapter, batch: Batch, item: BatchItem, *, redact: bool) -> dict[str, Any]:
    """The item as queued; `redact`: its team's upstream redaction is on."""
    request = chat_request(batch, item)
    if redact:
        request = adapter.upstream_redacted(request, context_redaction(record_context(batch, item)).text)
    payload = adapter.payload(request)  # type: ignore[attr-defined]
    return {**payload, "external_reference": queue_reference(item)}


def queue_step(batch: Batch, token: str) -> float | None:
    assert batch.connection is not None
    try:
        adapter = adapter_for(batch.connection)
        client = queue_client_for(batch.connection)
    except ValidationError as exc:
        fail_open_items(batch, " ".join(exc.messages), code="connection_unusable")
        return None
    assert client is not None
    redact = Team.objects.filter(pk=batch.team_id).values_list("upstream_redaction", flat=True).get()
    _submissions_form(batch, adapter, redact=redact)
    now = timezone.now()
    for submission in batch.submissions.filter(state=SubmissionState.SUBMITTING).order_by("id"):
        if submission.next_poll_at is None or submission.next_poll_at <= now:
            _submission_send(batch, submission, client, adapter, redact=redact)
            lease_renew(batch.pk, token)
    due = batch.submissions.filter(state=SubmissionState.POLLING, next_poll_at__lte=timezone.now()).order_by(
        "id"
    )
    for submission in due[: settings.BATCH_POLLS_PER_STEP]:
        submission_poll(batch, submission, client, adapter, token)
        lease_renew(batch.pk, token)
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


def _submissions_form(batch: Batch, adapter: ChatAdapter, *, redact: bool) -> None:
    """Group the pending items nobody has submitted into submissions under the size limit."""
    unsent = batch.items.filter(state=ItemState.PENDING, submission__isnull=True).order_by("index")
    sized = _sized(adapter, batch, unsent.iterator(chunk_size=READ_CHUNK), redact=redact)
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


def _sized(
    adapter: ChatAdapter, batch: Batch, items: Iterable[BatchItem], *, redact: bool
) -> Iterator[SizedItem]:
    """Each item's size as queued; an item the redactor fails on fails, unsent."""
    for item in items:
        try:
            body = _queue_body(adapter, batch, item, redact=redact)
        except Exception as exc:  # its message may quote the text: only its type is logged
            logger.error("the redactor failed (%s): batch item %s is not sent", type(exc).__name__, item.pk)
            fail_open_items(batch, NOT_SENT, code=REDACTOR_ERROR, items=batch.items.filter(pk=item.pk))
            continue
        yield SizedItem(item.pk, len(_json_bytes(body)))


def _submission_send(
    batch: Batch, submission: BatchSubmission, client: QueueClient, adapter: ChatAdapter, *, redact: bool
) -> None:
    items = list(submission.items.filter(state=ItemState.PENDING).order_by("position"))
    if not items:  # all cancelled before it went out
        BatchSubmission.objects.filter(pk=submission.pk).update(state=SubmissionState.DONE)
        return
    bodies = [_queue_body(adapter, batch, item, redact=redact) for item in items]
    if submission.budget_reservation_id is None:
        card = item_terms(batch).card  # the card that will price the items' records
        amount = sum(
            (
                request_worst_case_cost(
                    request=chat_request(batch, item),
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
            fail_open_items(
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
        submission_settle_budget(submission)


def _submission_refused(
    batch: Batch, submission: BatchSubmission, items: list[BatchItem], reason: str, *, code: str
) -> None:
    """A submission the budget refused before sending: like a refused chat turn, each item
    fails with the reason and leaves a rejected record of cost 0."""
    meter = UsageMeter(prompt_chars=0)
    meter.observe(UpstreamError(reason, code=code))
    outcome = meter.outcome(rejected_reason=reason)
    card = item_terms(batch).card
    with transaction.atomic():
        BatchSubmission.objects.filter(pk=submission.pk).update(state=SubmissionState.FAILED, error=reason)
        for item in items:
            record = usage_record_create(context=record_context(batch, item, card), outcome=outcome)
            BatchItem.objects.filter(pk=item.pk, state__in=OPEN_STATES).update(
                state=ItemState.FAILED,
                error=reason,
                error_code=code,
                usage_record=record,
                finished_at=timezone.now(),
            )


def _json_bytes(value: Any) -> bytes:
    import json

    return json.dumps(value, separators=(",", ":")).encode()
