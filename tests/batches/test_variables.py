"""Prompt variables in batches (issue 36): a preset version's variables are filled per line, from a
CSV row's column of their name or a JSONL line's `variables`, over the version's defaults; a line
that leaves one unfilled is refused at the preview naming its line; the item's request carries the
values for its record and never sends them."""

from __future__ import annotations

from typing import Any

import pytest

from playground.batches.inputs import LineError, Shared, utf8_lines
from playground.batches.models import Batch, BatchItem
from playground.batches.services.drafts import BatchInput, BatchInputInvalid, batch_draft_create
from playground.batches.services.metered_item import chat_request
from playground.chat.models import Conversation
from playground.chat.services.preset_setups import conversation_preset_save
from playground.presets.models import PresetVersion
from playground.providers.adapters import adapter_for
from playground.providers.models import ProviderConnection
from tests.support.actors import Actors
from tests.support.batches import jsonl

pytestmark = pytest.mark.django_db

MODEL = "@cf/moonshotai/kimi-k2.6"


@pytest.fixture
def version(actors: Actors, workers_connection: ProviderConnection) -> PresetVersion:
    conversation = Conversation.objects.create(
        team=actors.team,
        user=actors.owner,
        connection=workers_connection,
        model_id=MODEL,
        system_prompt="You write to {{customer}} in {{language}}.",
        variables=[
            {"name": "customer", "type": "text", "value": ""},
            {"name": "language", "type": "text", "value": "English"},
        ],
    )
    return conversation_preset_save(
        user=actors.owner, conversation_id=conversation.pk, preset_id=None, name="Letters"
    )


def draft(actors: Actors, version: PresetVersion, source: BatchInput) -> Batch:
    return batch_draft_create(
        user=actors.owner,
        connection_id=version.connection_id or 0,
        model_id=MODEL,
        preset_version_id=version.pk,
        source=source,
    )


def csv_input(text: str, template: str = "Write about {topic}.") -> BatchInput:
    return BatchInput(kind="csv", stream=utf8_lines(text), template=template, shared=Shared())


def systems(batch: Batch) -> list[str]:
    items = BatchItem.objects.filter(batch=batch).order_by("pk")
    return [item.request["messages"][0]["content"] for item in items]


def test_csv_columns_named_as_variables_fill_them_and_an_absent_or_empty_one_takes_the_default(
    actors: Actors, version: PresetVersion
) -> None:
    batch = draft(
        actors,
        version,
        csv_input("topic,customer,language\nrakes,Ada,French\nhoes,Grace,\n"),
    )

    assert systems(batch) == ["You write to Ada in French.", "You write to Grace in English."]
    item = BatchItem.objects.filter(batch=batch).order_by("pk").first()
    assert item is not None
    request = chat_request(batch, item)
    assert request.variables == {"customer": "Ada", "language": "French"}
    assert "variables" not in request.parameters
    assert batch.connection is not None
    assert "variables" not in adapter_for(batch.connection).body_as_sent(request)


def test_a_row_that_leaves_a_variable_without_a_value_is_refused_naming_its_line(
    actors: Actors, version: PresetVersion
) -> None:
    with pytest.raises(BatchInputInvalid) as caught:
        draft(actors, version, csv_input("topic,customer\nrakes,Ada\nhoes,\n"))

    assert [(error.line, error.message) for error in caught.value.errors] == [
        (
            3,
            "Fill in {{customer}}: the prompt uses it and it has no value. "
            "Give the line's value in a column of that name.",
        )
    ]
    assert not Batch.objects.exists()


def test_jsonl_lines_give_values_in_variables_and_unknown_names_or_shapes_are_refused(
    actors: Actors, version: PresetVersion
) -> None:
    line = {"messages": [{"role": "user", "content": "Hello"}]}
    batch = draft(
        actors,
        version,
        BatchInput(kind="jsonl", stream=utf8_lines(jsonl([{**line, "variables": {"customer": "Ada"}}]))),
    )
    assert systems(batch) == ["You write to Ada in English."]

    bad: list[dict[str, Any]] = [
        {**line, "variables": {"customer": "Ada", "tone": "warm"}},
        {**line, "variables": ["Ada"]},
        line,
    ]
    with pytest.raises(BatchInputInvalid) as caught:
        draft(actors, version, BatchInput(kind="jsonl", stream=utf8_lines(jsonl(bad))))

    errors: list[LineError] = caught.value.errors
    assert [(error.line, error.message) for error in errors] == [
        (
            1,
            "`variables` names tone, which the batch's preset does not declare "
            "(its variables are customer, language).",
        ),
        (2, '`variables` must be an object of values by name, e.g. {"customer": "Ada"}.'),
        (
            3,
            "Fill in {{customer}}: the prompt uses it and it has no value. "
            "Give the line's value in `variables` of that name.",
        ),
    ]
