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
from playground.usage.budgets import BUDGET_EXCEEDED, budget_headroom
from playground.usage.money import money


def batch_list(*, user: AnyUser) -> QuerySet[Batch]:
    if not user.is_authenticated:
        return Batch.objects.none()
    return Batch.objects.filter(team__memberships__user_id=user.pk).select_related("team", "connection")


@dataclass(frozen=True)
class BudgetFit:
    """What the budget a draft's items are held on (its creator's and the team's) says of it."""

    blocked: str  # why it cannot run at all (not one item's worst case fits); "" when it can
    partial: str  # why only some items would run; "" when all fit


def batch_budget_fit(*, batch: Batch, cost: Decimal | None) -> BudgetFit | None:
    """Whether the draft's worst case `cost` (its estimate with no cached token) fits this month's
    budget (None: no limit, or no price card). Each item holds its own worst case as it is sent,
    so a batch larger than what is left runs until the money runs out and the rest is refused."""
    if cost is None or not batch.item_count:
        return None
    headroom = budget_headroom(team_id=batch.team_id, user_id=batch.created_by_id)
    if headroom is None:
        return None
    per_item = cost / batch.item_count
    left = (
        f"{money(headroom.remaining)} of {headroom.whose} {money(headroom.limit)} budget remains this month"
    )
    if headroom.refusal(per_item) is not None:
        return BudgetFit(
            blocked=f"This batch cannot run now: {left}, less than one item's worst case "
            f"({money(per_item)}). Raise the limit on the Budgets page, or wait for next month.",
            partial="",
        )
    if headroom.refusal(cost) is not None:
        fit = int(headroom.remaining / per_item) if per_item else batch.item_count
        return BudgetFit(
            blocked="",
            partial=f"Its worst case is {money(cost)} and {left}: about {fit} of its "
            f"{batch.item_count} items would run before the rest are refused for budget.",
        )
    return BudgetFit(blocked="", partial="")


def batch_budget_blocked(batch: Batch) -> bool:
    """Whether the budget cannot cover one of the batch's items now (its estimate per item)."""
    cost = batch.estimate.get("cost") if batch.estimate else None
    fit = batch_budget_fit(batch=batch, cost=Decimal(cost) if cost else None)
    return fit is not None and bool(fit.blocked)


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
    refused_reason: str  # what the provider said of the first of them ("" when none)
    budget_refused: int  # failed items the budget refused
    budget_blocked: bool  # the budget still cannot cover one item: a retry of those fails again
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
        """Failed items worth sending again (not refused for their own input, nor for a budget
        that still cannot cover them)."""
        return self.failed - self.refused - (self.budget_refused if self.budget_blocked else 0)


def batch_progress(*, batch: Batch, now: dt.datetime | None = None) -> Progress:
    rows = batch.items.values("state", "input_refused", "error_code").annotate(n=Count("id"))
    counts = {state.value: 0 for state in ItemState}
    refused = budget_refused = 0
    for row in rows:
        counts[row["state"]] += row["n"]
        failed = row["state"] == ItemState.FAILED
        refused += row["n"] if failed and row["input_refused"] else 0
        budget_refused += row["n"] if failed and row["error_code"] == BUDGET_EXCEEDED else 0
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
        refused_reason=_first_refusal(batch) if refused else "",
        budget_refused=budget_refused,
        budget_blocked=bool(budget_refused) and batch_budget_blocked(batch),
        label=label,
        tone=tone,
    )


def _first_refusal(batch: Batch) -> str:
    """The provider's words for the first item it refused for its own input (too long, a
    parameter it does not take, ...): the page names the real cause, not a guess."""
    refused = batch.items.filter(state=ItemState.FAILED, input_refused=True).order_by("index")
    error = refused.values_list("error", flat=True).first() or ""
    return error if len(error) <= 300 else error[:299] + "…"


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
