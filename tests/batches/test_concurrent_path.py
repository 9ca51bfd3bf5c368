"""The concurrency path: connections without a queue run items as separate metered requests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from playground.batches.models import Batch, BatchPath, ItemState
from playground.batches.services.actions import batch_cancel, batch_retry_failed
from playground.batches.services.step import batch_step_run
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord
from tests.fakes.upstream import FakeUpstream, chat_completion, error, json_reply, usage
from tests.support.actors import Actors
from tests.support.batches import NO_QUEUE_MODEL, prompts

pytestmark = pytest.mark.django_db


def _run(batch: Batch) -> None:
    for _ in range(10):
        batch.refresh_from_db()
        if batch_step_run(batch_id=batch.pk, token=batch.chain_token) is None:
            return


def test_a_connection_without_a_queue_runs_items_concurrently_and_says_why(
    openai_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(openai_connection, prompts(6, max_tokens=8))

    _run(batch)

    assert batch.path == BatchPath.CONCURRENT
    assert "no batch queue" in batch.path_reason and "4 at a time" in batch.path_reason
    assert set(batch.items.values_list("state", flat=True)) == {ItemState.DONE}
    sources = sorted(UsageRecord.objects.values_list("source", flat=True))
    assert sources == sorted(f"batch-item:{pk}:1" for pk in batch.items.values_list("pk", flat=True))
    assert all(request.json["stream"] is False for request in fake_upstream.requests)


def test_a_model_the_catalogue_keeps_off_the_queue_runs_concurrently(
    workers_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(workers_connection, prompts(2), model=NO_QUEUE_MODEL)

    _run(batch)

    assert batch.path == BatchPath.CONCURRENT
    assert "does not take Workers AI's batch queue" in batch.path_reason
    assert not any("queueRequest" in request.path for request in fake_upstream.requests)
    assert batch.items.filter(state=ItemState.DONE).count() == 2


def test_done_items_are_never_sent_again_and_failed_ones_can_be_retried(
    openai_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
    actors: Actors,
    settings: Any,
) -> None:
    settings.UPSTREAM_MAX_RETRIES = 0
    settings.BATCH_CONCURRENCY = 1
    batch = running_batch(openai_connection, prompts(3))
    ok = json_reply(chat_completion("fine", usage_body=usage(3, 1)))
    fake_upstream.script(ok, error(500), ok)
    _run(batch)
    assert list(batch.items.order_by("index").values_list("state", flat=True)) == ["done", "failed", "done"]

    assert batch_retry_failed(user=actors.owner, batch_id=batch.pk) == 1
    _run(batch)

    retried = batch.items.get(index=1)
    assert retried.state == ItemState.DONE and retried.attempt == 2
    assert len(fake_upstream.requests) == 4  # the two done items were not sent again
    assert UsageRecord.objects.filter(source=f"batch-item:{retried.pk}:1").exists()  # the failed attempt's
    assert UsageRecord.objects.filter(source=f"batch-item:{retried.pk}:2").exists()


def test_cancel_stops_pending_items(
    openai_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
    actors: Actors,
) -> None:
    batch = running_batch(openai_connection, prompts(3))

    batch = batch_cancel(user=actors.owner, batch_id=batch.pk)
    _run(batch)

    assert batch.status == "cancelled" and batch.finished_at is not None
    assert set(batch.items.values_list("state", flat=True)) == {ItemState.CANCELLED}
    assert fake_upstream.requests == []
