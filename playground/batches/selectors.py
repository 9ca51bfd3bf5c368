"""Reads of batches, always scoped to the acting user's teams; progress is read from the database."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from playground.accounts.selectors import AnyUser
from playground.batches.models import Batch, BatchItem, BatchStatus, ItemState


def batch_list(*, user: AnyUser) -> QuerySet[Batch]:
    if not user.is_authenticated:
        return Batch.objects.none()
    return Batch.objects.filter(team__memberships__user_id=user.pk).select_related("team", "connection")


def batch_get(*, user: AnyUser, batch_id: int) -> Batch | None:
    """The batch if one of the user's teams owns it; None otherwise (callers answer 404)."""
    return batch_list(user=user).filter(pk=batch_id).first()


def batch_item_find(*, user: AnyUser, item_id: int) -> BatchItem | None:
    """An item by its id (as usage records name it), if one of the user's teams owns its batch."""
    return BatchItem.objects.filter(pk=item_id, batch__in=batch_list(user=user)).first()


def batch_item_get(*, batch: Batch, index: int) -> BatchItem | None:
    return (
        batch.items.select_related("usage_record", "usage_record__price_card", "submission")
        .filter(index=index)
        .first()
    )


def batch_items_page(*, batch: Batch, state: str = "", offset: int = 0, limit: int = 50) -> list[BatchItem]:
    items = batch.items.select_related("usage_record")
    if state:
        items = items.filter(state=state)
    return list(items.order_by("index")[offset : offset + limit])


@dataclass(frozen=True)
class Progress:
    total: int
    counts: dict[str, int]
    finished: int  # done + failed + cancelled
    percent: int
    items_per_second: float | None
    eta_seconds: float | None
    cost: Decimal
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    unpriced: int
    refused: int  # failed items the provider refused for their own input (a retry fails again)
    label: str  # the batch's state as the pages say it: "Failed", "Finished, 2 failed", ...
    tone: str  # how it is coloured: running, ok, warning, danger or muted

    @property
    def running(self) -> bool:
        return self.finished < self.total

    @property
    def failed(self) -> int:
        return self.counts[ItemState.FAILED]

    @property
    def retryable(self) -> int:
        """Failed items worth sending again (not refused for their own input)."""
        return self.failed - self.refused


def batch_progress(*, batch: Batch, now: dt.datetime | None = None) -> Progress:
    rows = batch.items.values("state", "input_refused").annotate(n=Count("id"))
    counts = {state.value: 0 for state in ItemState}
    refused = 0
    for row in rows:
        counts[row["state"]] += row["n"]
        refused += row["n"] if row["state"] == ItemState.FAILED and row["input_refused"] else 0
    totals = batch.items.filter(usage_record__isnull=False).aggregate(
        cost=Sum("usage_record__total_cost"),
        prompt=Sum("usage_record__prompt_tokens"),
        cached=Sum("usage_record__cached_tokens"),
        completion=Sum("usage_record__completion_tokens"),
        unpriced=Count("id", filter=Q(usage_record__price_card__isnull=True)),
    )
    total = batch.item_count or sum(counts.values())
    finished = counts[ItemState.DONE] + counts[ItemState.FAILED] + counts[ItemState.CANCELLED]
    label, tone = _state(batch, counts, finished=finished, total=total)
    answered = counts[ItemState.DONE] + counts[ItemState.FAILED]
    rate = eta = None
    if batch.submitted_at and answered:
        end = batch.finished_at or now or timezone.now()
        elapsed = max((end - batch.submitted_at).total_seconds(), 0.001)
        rate = answered / elapsed
        remaining = counts[ItemState.PENDING] + counts[ItemState.SUBMITTED]
        eta = remaining / rate if remaining and batch.finished_at is None else None
    return Progress(
        total=total,
        counts=counts,
        finished=finished,
        percent=int(100 * finished / total) if total else 100,
        items_per_second=rate,
        eta_seconds=eta,
        cost=totals["cost"] or Decimal(0),
        prompt_tokens=totals["prompt"] or 0,
        cached_tokens=totals["cached"] or 0,
        completion_tokens=totals["completion"] or 0,
        unpriced=totals["unpriced"] or 0,
        refused=refused,
        label=label,
        tone=tone,
    )


def _state(batch: Batch, counts: dict[str, int], *, finished: int, total: int) -> tuple[str, str]:
    """(label, tone) of the batch: failures are never shown as a plain "Finished" (a batch
    whose every item failed is "Failed")."""
    failed = counts[ItemState.FAILED]
    with_failed = f", {failed:,} failed" if failed else ""
    if batch.status == BatchStatus.DRAFT:
        return "Draft", "muted"
    if batch.status == BatchStatus.CANCELLED:
        return f"Cancelled{with_failed}", "muted"
    if finished < total or batch.finished_at is None:
        return f"Running{with_failed}", "warning" if failed else "running"
    if failed and not counts[ItemState.DONE]:
        return "Failed", "danger"
    return f"Finished{with_failed}", "warning" if failed else "ok"


def batch_result_rows(*, batch: Batch) -> Iterator[dict[str, Any]]:
    """Every item in input order with its output, usage and error, read in chunks (for exports)."""
    items = batch.items.select_related("usage_record").order_by("index")
    for item in items.iterator(chunk_size=500):
        record = item.usage_record
        yield {
            "index": item.index,
            "line": item.line,
            "external_reference": item.external_reference,
            "state": item.state,
            "attempt": item.attempt,
            "input": item.request,
            "output": item.response,
            "usage": None
            if record is None
            else {
                "prompt_tokens": record.prompt_tokens,
                "cached_tokens": record.cached_tokens,
                "completion_tokens": record.completion_tokens,
                "total_cost": str(record.total_cost),
                "usage_source": record.usage_source,
                "request_id": str(record.request_id),
            },
            "error": item.error or None,
        }
