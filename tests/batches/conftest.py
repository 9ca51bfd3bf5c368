"""Batch fixtures: drafts built from JSONL (the connections to the fake upstream are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from playground.batches.inputs import utf8_lines
from playground.batches.models import Batch
from playground.batches.services.actions import batch_confirm
from playground.batches.services.drafts import BatchInput, batch_draft_create
from playground.providers.models import ProviderConnection
from tests.support.actors import Actors
from tests.support.batches import QUEUE_MODEL, jsonl


@pytest.fixture
def running_batch(actors: Actors) -> Callable[..., Batch]:
    """A confirmed batch of `rows` on `connection` (its chain is not started: tests run the steps)."""

    def make(
        connection: ProviderConnection, rows: list[dict[str, Any]], *, model: str = QUEUE_MODEL
    ) -> Batch:
        draft = batch_draft_create(
            user=actors.owner,
            connection_id=connection.pk,
            model_id=model,
            source=BatchInput(kind="jsonl", stream=utf8_lines(jsonl(rows))),
        )
        return batch_confirm(user=actors.owner, batch_id=draft.pk)

    return make
