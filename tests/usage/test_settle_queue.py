"""Group commit (`usage.calls.settlement`): calls that end together get their records and budget
settlements in one transaction, and a group that cannot be written together is written one
call at a time."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from playground.catalog.models import CatalogModel
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.budgets import budget_reconcile, budget_settle_many
from playground.usage.calls import settlement as settle_queue_module
from playground.usage.calls.budget import HoldAtAdmission, calls_hold_together
from playground.usage.calls.call import MeteredCall
from playground.usage.calls.settlement import SettleQueue
from playground.usage.metering import Outcome
from playground.usage.models import BudgetLedger, BudgetReservation, UsageRecord, UsageSource, UsageStatus
from playground.usage.records import usage_records_create_many
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.usage.test_budgets import call, priced_model, set_budget

__all__ = ["priced_model"]  # the fixture, used by name


def ended(actors: Actors, upstream: FakeUpstream, completion_tokens: int) -> MeteredCall:
    """A call admitted (its worst case held) that has ended with `completion_tokens` of answer."""
    metered = call(actors, upstream, budget=HoldAtAdmission())
    calls_hold_together([metered])
    assert metered.reservation is not None, metered.refusal
    metered.outcome = Outcome(
        status=UsageStatus.OK,
        usage=NormalizedUsage(prompt_tokens=3, completion_tokens=completion_tokens, cached_tokens=None),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=40,
        latency_ms=90,
    )
    return metered


def settle_at_once(calls: list[MeteredCall]) -> None:
    queue = SettleQueue()

    async def together() -> None:
        await asyncio.gather(*(queue.settle(metered) for metered in calls))

    async_to_sync(together)()


def group_sizes(monkeypatch: pytest.MonkeyPatch, *, fail: bool = False) -> list[int]:
    sizes: list[int] = []
    real = usage_records_create_many

    def counted(settled: Any) -> list[UsageRecord]:
        sizes.append(len(settled))
        if fail:
            raise RuntimeError("the group's INSERT failed")
        return real(settled)

    monkeypatch.setattr(settle_queue_module, "usage_records_create_many", counted)
    return sizes


def team_ledger(actors: Actors) -> BudgetLedger:
    return BudgetLedger.objects.get(team=actors.team, user__isnull=True, api_key__isnull=True)


@pytest.mark.django_db
def test_calls_that_end_together_are_written_in_one_group_and_settled_at_their_actual_cost(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_budget(actors, "50")
    calls = [ended(actors, fake_upstream, completion_tokens=10 * (n + 1)) for n in range(5)]
    assert team_ledger(actors).reserved_usd == Decimal(5)  # $1 worst case each
    sizes = group_sizes(monkeypatch)

    settle_at_once(calls)

    assert sizes == [5]
    # 10 + 20 + ... + 50 output tokens at $1 per 1,000
    assert [metered.record.total_cost for metered in calls if metered.record] == [
        Decimal("0.01") * (n + 1) for n in range(5)
    ]
    for ledger in BudgetLedger.objects.filter(team=actors.team):  # the team's and the member's
        assert (ledger.spent_usd, ledger.reserved_usd) == (Decimal("0.15"), Decimal(0))
    assert list(BudgetReservation.objects.order_by("actual_usd").values_list("actual_usd", flat=True)) == [
        Decimal("0.01") * (n + 1) for n in range(5)
    ]
    assert UsageRecord.objects.count() == 5


@pytest.mark.django_db
def test_a_group_that_cannot_be_written_together_is_written_one_call_at_a_time(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_budget(actors, "50")
    calls = [ended(actors, fake_upstream, completion_tokens=100) for _ in range(3)]
    sizes = group_sizes(monkeypatch, fail=True)

    settle_at_once(calls)

    assert sizes == [3]  # tried together once, then each alone
    assert [metered.record.status if metered.record else None for metered in calls] == [UsageStatus.OK] * 3
    assert UsageRecord.objects.count() == 3
    ledger = team_ledger(actors)
    assert (ledger.spent_usd, ledger.reserved_usd) == (Decimal("0.3"), Decimal(0))


@pytest.mark.django_db
def test_a_reservation_settled_already_is_not_counted_again(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    set_budget(actors, "50")
    first, second = (ended(actors, fake_upstream, completion_tokens=100) for _ in range(2))
    assert first.reservation is not None and second.reservation is not None
    assert budget_reconcile(reservation=first.reservation, actual=Decimal("0.2"))  # e.g. by the sweep

    touched = budget_settle_many([(first.reservation, Decimal("0.1")), (second.reservation, Decimal("0.1"))])

    assert touched == {team_ledger(actors).pk}
    ledger = team_ledger(actors)
    assert (ledger.spent_usd, ledger.reserved_usd) == (Decimal("0.3"), Decimal(0))
    assert not budget_settle_many([(second.reservation, Decimal("0.1"))])
