"""Batch fixtures: drafts built from JSONL (the connections to the fake upstream are in tests/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from playground.batches.inputs import utf8_lines
from playground.batches.models import Batch
from playground.batches.services.actions import batch_confirm
from playground.batches.services.drafts import BatchInput, batch_draft_create
from playground.providers.models import ProviderConnection
from tests.support.actors import Actors
from tests.support.engine import running_engine  # noqa: F401  (the real embedded engine)

QUEUE_MODEL = "@cf/openai/gpt-oss-20b"  # the catalogue says it takes the batch queue
NO_QUEUE_MODEL = "@cf/qwen/qwen3-30b-a3b-fp8"  # ... and this one does not


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(row) for row in rows) + "\n"


def prompts(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"messages": [{"role": "user", "content": f"Question {i}"}], **extra} for i in range(n)]


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
