"""Batch items take the same budget step as chat: an unpriced model under a budget is refused
item by item before anything is sent, on both paths."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest

from playground.batches.models import Batch, ItemState
from playground.catalog.models import PriceCard
from playground.providers.models import ProviderConnection
from playground.usage.budgets import UNPRICED_REFUSED
from playground.usage.models import TeamBudget, UsageRecord, UsageStatus
from tests.batches.test_concurrent_path import _run as run
from tests.fakes.upstream import FakeUpstream
from tests.support.batches import QUEUE_MODEL, prompts

pytestmark = pytest.mark.django_db


def assert_refused_unsent(batch: Batch, upstream: FakeUpstream) -> None:
    assert upstream.requests == []
    for item in batch.items.all():
        assert (item.state, item.error_code) == (ItemState.FAILED, UNPRICED_REFUSED)
        assert "Set a price on the Catalogue page" in item.error
        assert item.usage_record is not None and item.usage_record.status == UsageStatus.REJECTED
        assert item.usage_record.price_card is None
    assert UsageRecord.objects.filter(path="batch").count() == batch.items.count()


def test_an_item_for_an_unpriced_model_is_refused_on_the_concurrent_path(
    openai_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(openai_connection, prompts(2), model="@cf/typed/no-card")
    TeamBudget.objects.create(team_id=batch.team_id, monthly_limit_usd=Decimal(100), alert_thresholds=[])

    run(batch)

    assert_refused_unsent(batch, fake_upstream)


def test_a_queue_submission_for_an_unpriced_model_is_refused(
    workers_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    PriceCard.objects.filter(model__model_id=QUEUE_MODEL).delete()
    batch = running_batch(workers_connection, prompts(2))
    TeamBudget.objects.create(team_id=batch.team_id, monthly_limit_usd=Decimal(100), alert_thresholds=[])

    run(batch)

    assert_refused_unsent(batch, fake_upstream)
