"""The queue path against the real embedded engine: a submission the engine refuses because of
one item. The engine checks a whole submission before it queues anything and refuses it all,
naming the item (`requests[N]: ...`); that item must fail with its own error and the others be
answered."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.conf import LazySettings

from playground.batches.inputs import utf8_lines
from playground.batches.models import Batch, BatchSubmission, ItemState
from playground.batches.services.actions import batch_confirm, batch_retry_failed
from playground.batches.services.drafts import BatchInput, batch_draft_create
from playground.batches.services.step import batch_step_run
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_engine_ensure
from playground.usage.models import UsageRecord
from tests.support.actors import Actors
from tests.support.batches import jsonl

pytestmark = pytest.mark.django_db

# Valid JSON Schema 2020-12 (so the pre-check, which knows the schema language but not each
# engine's grammar builder, lets it through) that the engine's grammar builder cannot turn into
# a grammar: the engine refuses it with 8001 when the submission arrives.
NO_GRAMMAR = {
    "type": "json_schema",
    "json_schema": {
        "name": "odd",
        "schema": {"type": "object", "properties": {"a": {"not": {"type": "string"}}}},
    },
}


@pytest.fixture
def engine_connection(actors: Actors, settings: LazySettings, running_engine: Any, catalogue: None) -> Any:
    settings.ENGINE_URL = running_engine.url
    settings.ENGINE_API_TOKEN = running_engine.token
    settings.BATCH_POLL_FIRST_SECONDS = 0.2
    settings.BATCH_POLL_MAX_SECONDS = 1.0
    return connection_engine_ensure(team=actors.team)


def _rows(n: int) -> list[dict[str, Any]]:
    return [
        {"messages": [{"role": "user", "content": f"Say the number {i}."}], "max_tokens": 4} for i in range(n)
    ]


def _draft(actors: Actors, connection: ProviderConnection, rows: list[dict[str, Any]]) -> Batch:
    return batch_draft_create(
        user=actors.owner,
        connection_id=connection.pk,
        model_id=ENGINE_MODEL_ID,
        source=BatchInput(kind="jsonl", stream=utf8_lines(jsonl(rows))),
    )


def _run_to_the_end(batch: Batch, *, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch.refresh_from_db()
        countdown = batch_step_run(batch_id=batch.pk, token=batch.chain_token)
        if countdown is None:
            return
        time.sleep(min(countdown, 0.5))
    raise AssertionError("the batch did not finish in time")


def test_the_engine_refuses_one_items_schema_and_only_that_item_fails(
    actors: Actors, engine_connection: ProviderConnection
) -> None:
    rows = _rows(5)
    rows[3]["response_format"] = NO_GRAMMAR  # line 4
    batch = batch_confirm(user=actors.owner, batch_id=_draft(actors, engine_connection, rows).pk)

    _run_to_the_end(batch)

    items = {item.index: item for item in batch.items.all()}
    failed = items[3]
    assert failed.state == ItemState.FAILED and failed.line == 4 and failed.input_refused
    assert failed.error.startswith("The provider refused this item: response_format uses a JSON Schema")
    assert "requests[" not in failed.error  # the submission's numbering is not the user's
    for index in (0, 1, 2, 4):
        assert items[index].state == ItemState.DONE, items[index].error
        response = items[index].response
        assert items[index].error == "" and response is not None and response["text"]
    assert UsageRecord.objects.filter(path="batch", status="ok").count() == 4
    assert BatchSubmission.objects.get().item_count == 5


def test_an_item_stored_before_the_range_check_is_refused_alone_and_retry_leaves_it(
    actors: Actors, engine_connection: ProviderConnection
) -> None:
    """The issue's case: `"temperature": 5` on line 4 of five. The pre-check refuses it now, so
    the item is stored as a draft of the old code would have stored it (through the ORM), and
    the engine's own range check is what refuses it."""
    draft = _draft(actors, engine_connection, _rows(5))
    item = draft.items.get(index=3)
    item.request = {**item.request, "temperature": 5}
    item.save(update_fields=["request"])
    batch = batch_confirm(user=actors.owner, batch_id=draft.pk)

    _run_to_the_end(batch)

    states = dict(batch.items.values_list("index", "state"))
    assert states == {0: "done", 1: "done", 2: "done", 3: "failed", 4: "done"}
    errors = dict(batch.items.values_list("index", "error"))
    assert errors[3] == ("The provider refused this item: `temperature` must be a number from 0 to 2; got 5.")
    assert {errors[i] for i in (0, 1, 2, 4)} == {""}
    assert batch_retry_failed(user=actors.owner, batch_id=batch.pk) == 0
    assert batch.items.get(index=3).attempt == 1
