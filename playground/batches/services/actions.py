"""What a user does to a batch: confirm a draft, discard it, cancel pending items, retry failed ones."""

from __future__ import annotations

from decimal import Decimal

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from playground.accounts.permissions import require_run_role
from playground.batches.models import Batch, BatchItem, BatchStatus, ItemState
from playground.batches.selectors import batch_budget_blocked, batch_budget_fit, batch_get
from playground.batches.services.chain import finish_if_complete, start_chain
from playground.batches.services.drafts import batch_estimate_today
from playground.usage.budgets import BUDGET_EXCEEDED


class BatchNotFound(Exception):
    """No batch with that id in the user's teams (answered as 404)."""


def batch_confirm(*, user: User, batch_id: int) -> Batch:
    """Queue a draft: it is submitted now, and its items are priced by today's cards. Refused
    (`ValidationError`) when the budget cannot cover even one item's worst case."""
    batch = _batch_for_run(user=user, batch_id=batch_id)
    if batch.status != BatchStatus.DRAFT:
        return batch
    cost = batch_estimate_today(batch=batch).get("cost")
    fit = batch_budget_fit(batch=batch, cost=Decimal(cost) if cost else None)
    if fit is not None and fit.blocked:
        raise ValidationError(fit.blocked)
    now = timezone.now()
    with transaction.atomic():
        batch.status = BatchStatus.RUNNING
        batch.submitted_at = now
        batch.priced_on = now.date()
        batch.save(update_fields=["status", "submitted_at", "priced_on"])
        start_chain(batch)
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
        finish_if_complete(batch.pk)
    batch.refresh_from_db()
    return batch


def batch_retry_failed(*, user: User, batch_id: int) -> int:
    """Send the failed items again, each as a new attempt (a new usage record). Returns how many.

    Items the provider refused for their own input are left failed: the same request would be
    refused again (the page says so, and which lines to fix); so are items the budget refused
    while it still cannot cover one.
    """
    batch = _batch_for_run(user=user, batch_id=batch_id)
    if batch.status == BatchStatus.DRAFT:
        return 0
    with transaction.atomic():
        retryable = batch.items.filter(state=ItemState.FAILED, input_refused=False)
        if batch_budget_blocked(batch):
            retryable = retryable.exclude(error_code=BUDGET_EXCEEDED)
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
            start_chain(batch)
    return len(failed)


def _batch_for_run(*, user: User, batch_id: int) -> Batch:
    batch = batch_get(user=user, batch_id=batch_id)
    if batch is None:
        raise BatchNotFound(batch_id)
    require_run_role(user=user, team_id=batch.team_id)
    return batch
