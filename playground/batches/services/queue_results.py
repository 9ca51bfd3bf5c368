"""A queue submission's results: polled at a paced backoff, matched to their items and recorded, or failed."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator, Sequence
from decimal import Decimal

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.db.models import Max, Sum
from django.utils import timezone

from playground.batches.models import Batch, BatchItem, BatchSubmission, SubmissionState
from playground.batches.services.chain import OPEN_STATES, fail_open_items, lease_renew
from playground.batches.services.metered_item import ItemTerms, item_send, item_terms
from playground.providers.adapters import ChatAdapter
from playground.providers.adapters.queued_result import QueuedResultReply
from playground.providers.http import UpstreamHTTPError
from playground.providers.queue import QueueClient, QueuePending, QueueResponse
from playground.usage.budgets import Reservation, budget_reconcile
from playground.usage.models import UsageRecord

logger = logging.getLogger(__name__)


RECORDS_PER_COMMIT = 100


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


def submission_poll(
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
        fail_open_items(
            batch, "The provider's results did not include this item.", code="missing_result", items=missing
        )
        BatchSubmission.objects.filter(pk=submission.pk).update(
            state=SubmissionState.DONE, polls=submission.polls + 1
        )
    _poll_next_oldest_soon(batch)
    submission_settle_budget(submission)


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
        fail_open_items(batch, reason, code=code, items=submission.items.filter(state__in=OPEN_STATES))
    submission_settle_budget(submission)


def submission_settle_budget(submission: BatchSubmission) -> None:
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
    terms = item_terms(batch)
    results = iter(matched)
    more = True
    while more:
        with transaction.atomic():
            more = async_to_sync(_replay_results)(
                batch, submission, results, sent_by, secret, terms, turnaround_ms
            )
        lease_renew(batch.pk, token)


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
        reply = QueuedResultReply(
            result=response.result,
            success=response.success,
            sent_by=sent_by,
            request_id=submission.request_id,
            token=secret,
            turnaround_ms=turnaround_ms,
        )
        await item_send(batch, item, reply, terms, held_by_caller=True)
        if count >= RECORDS_PER_COMMIT or time.monotonic() - started > settings.BATCH_LEASE_SECONDS / 3:
            return True
    return False


def _ms_since(at: dt.datetime) -> int:
    return round((timezone.now() - at).total_seconds() * 1000)


def _duration(delta: dt.timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
