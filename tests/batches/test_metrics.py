"""The batch queue's depth and age per team, read at scrape time."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from playground.accounts.models import Team
from playground.batches.metrics import BatchQueueCollector
from playground.batches.models import Batch, BatchItem, BatchStatus, ItemState
from playground.lib.metrics import metrics_exposition
from tests.support.actors import Actors
from tests.support.metrics import Scrape

pytestmark = pytest.mark.django_db


def batch_with(team: Team, states: list[str], *, status: str, submitted: dt.datetime | None) -> Batch:
    batch = Batch.objects.create(
        team=team,
        model_id="@cf/moonshotai/kimi-k2.5",
        input_kind="jsonl",
        path="concurrent",
        path_reason="test",
        status=status,
        submitted_at=submitted,
        item_count=len(states),
    )
    BatchItem.objects.bulk_create(
        BatchItem(batch=batch, index=index, line=index + 1, request={}, state=state)
        for index, state in enumerate(states)
    )
    return batch


def test_waiting_items_of_running_batches_and_the_oldest_ones_age_per_team(actors: Actors) -> None:
    now = timezone.now()
    P, S, D = ItemState.PENDING, ItemState.SUBMITTED, ItemState.DONE
    batch_with(
        actors.team, [P, P, S, D], status=BatchStatus.RUNNING, submitted=now - dt.timedelta(seconds=90)
    )
    batch_with(actors.team, [P], status=BatchStatus.RUNNING, submitted=now - dt.timedelta(seconds=10))
    batch_with(actors.team, [P, P], status=BatchStatus.DRAFT, submitted=None)  # not confirmed: not queued
    batch_with(actors.other_team, [S], status=BatchStatus.RUNNING, submitted=now - dt.timedelta(seconds=5))
    batch_with(actors.other_team, [D, D], status=BatchStatus.DONE, submitted=now - dt.timedelta(hours=1))

    scrape = Scrape.parse(metrics_exposition([BatchQueueCollector()]).decode())

    alpha, bravo = str(actors.team.pk), str(actors.other_team.pk)
    assert scrape.value("playground_batch_items_waiting", team=alpha, state="pending") == 3
    assert scrape.value("playground_batch_items_waiting", team=alpha, state="submitted") == 1
    assert scrape.value("playground_batch_items_waiting", team=bravo, state="submitted") == 1
    assert scrape.value("playground_batch_items_waiting", team=bravo, state="pending") == 0
    assert len(scrape.label_sets("playground_batch_items_waiting")) == 4  # two teams with items waiting
    assert 90 <= scrape.value("playground_batch_oldest_waiting_seconds", team=alpha) < 120
    assert 5 <= scrape.value("playground_batch_oldest_waiting_seconds", team=bravo) < 35
