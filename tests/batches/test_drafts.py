"""Drafts: a batch started from a conversation carries its settings, whoever calls the service,
through a preset version of them: an identical one reused, else one saved."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from playground.batches.inputs import Shared, utf8_lines
from playground.batches.models import Batch
from playground.batches.services.drafts import BatchInput, BatchInputInvalid, batch_draft_create
from playground.chat.models import Conversation
from playground.chat.services.preset_setups import conversation_preset_save
from playground.presets.models import Preset, PresetVersion
from playground.providers.models import ProviderConnection
from tests.support.actors import Actors
from tests.support.batches import NO_QUEUE_MODEL, jsonl, prompts

pytestmark = pytest.mark.django_db

SCHEMA_MODEL = "@cf/moonshotai/kimi-k2.6"  # takes tools and JSON schemas (per the catalogue)
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
SCHEMA = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}}


def _conversation(actors: Actors, connection: ProviderConnection) -> Conversation:
    return Conversation.objects.create(
        team=actors.team,
        user=actors.owner,
        connection=connection,
        model_id=SCHEMA_MODEL,
        system_prompt="Answer in French.",
        parameters={"temperature": 0.2, "not_a_workers_parameter": 1},
        tools=[{**TOOL, "returns_json": True, "mocks": ["{}"]}],
        tool_choice="required",
        parallel_tool_calls=False,
        response_format=SCHEMA,
    )


def _draft(
    actors: Actors,
    connection: ProviderConnection,
    conversation_id: int,
    system_prompt: str = "",
    text: str = "",
    model_id: str = SCHEMA_MODEL,
) -> Batch:
    return batch_draft_create(
        user=actors.owner,
        connection_id=connection.pk,
        model_id=model_id,
        from_conversation_id=conversation_id,
        source=BatchInput(
            kind="jsonl",
            stream=utf8_lines(text or jsonl(prompts(1))),
            shared=Shared(system_prompt=system_prompt),
        ),
    )


def test_a_draft_from_a_conversation_carries_the_settings_its_connection_takes(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    conversation = _conversation(actors, workers_connection)

    request = _draft(actors, workers_connection, conversation.pk).items.get().request

    assert request["messages"][0] == {"role": "system", "content": "Answer in French."}
    assert request["temperature"] == 0.2 and "not_a_workers_parameter" not in request
    assert request["tools"] == [TOOL]  # mocks and returns_json are ours: never sent
    assert request["tool_choice"] == "required" and request["parallel_tool_calls"] is False
    assert request["response_format"] == SCHEMA


def test_a_typed_system_prompt_wins_over_the_conversations(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    conversation = _conversation(actors, workers_connection)

    draft = _draft(actors, workers_connection, conversation.pk, system_prompt="Be brief.")
    request = draft.items.get().request

    assert request["messages"][0] == {"role": "system", "content": "Be brief."}
    assert request["temperature"] == 0.2


def test_another_teams_conversation_is_refused_and_nothing_is_stored(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    foreign = Conversation.objects.create(
        team=actors.other_team, user=actors.outsider, model_id=NO_QUEUE_MODEL
    )

    with pytest.raises(ValidationError) as refused:
        _draft(actors, workers_connection, foreign.pk)

    assert "conversation" in refused.value.message_dict
    assert not Batch.objects.exists()


def test_a_conversation_saved_as_a_preset_starts_a_batch_from_that_version_not_a_copy(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    conversation = _conversation(actors, workers_connection)
    Conversation.objects.filter(pk=conversation.pk).update(parameters={"temperature": 0.2})
    saved = conversation_preset_save(
        user=actors.owner, conversation_id=conversation.pk, preset_id=None, name="French answers"
    )

    batch = _draft(actors, workers_connection, conversation.pk)

    assert batch.preset_version == saved and batch.from_conversation_id == conversation.pk
    assert PresetVersion.objects.count() == 1


def test_a_conversation_unchanged_reuses_its_version_and_a_changed_one_saves_the_next(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    conversation = _conversation(actors, workers_connection)
    Conversation.objects.filter(pk=conversation.pk).update(title="Tickets")

    first = _draft(actors, workers_connection, conversation.pk)
    again = _draft(actors, workers_connection, conversation.pk)
    Conversation.objects.filter(pk=conversation.pk).update(parameters={"temperature": 0.7})
    changed = _draft(actors, workers_connection, conversation.pk)

    assert first.preset_version is not None and again.preset_version == first.preset_version
    preset = Preset.objects.get()
    assert (preset.team_id, preset.name) == (actors.team.pk, f"Tickets · conversation {conversation.pk}")
    assert first.preset_version.number == 1 and first.preset_version.setup["parameters"] == {
        "temperature": 0.2
    }
    assert changed.preset_version is not None and changed.preset_version.preset == preset
    assert changed.preset_version.number == 2
    assert changed.items.get().request["temperature"] == 0.7


def test_the_conversations_model_runs_the_batch_and_a_deleted_connection_is_replaced_by_the_one_given(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    conversation = Conversation.objects.create(
        team=actors.team, user=actors.owner, model_id=NO_QUEUE_MODEL, system_prompt="Be brief."
    )

    batch = _draft(actors, workers_connection, conversation.pk, model_id=SCHEMA_MODEL)

    assert (batch.connection_id, batch.model_id) == (workers_connection.pk, NO_QUEUE_MODEL)
    assert batch.preset_version is not None
    assert (batch.preset_version.connection_id, batch.preset_version.model_id) == (
        workers_connection.pk,
        NO_QUEUE_MODEL,
    )


def test_bad_input_from_a_conversation_saves_no_version(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    conversation = _conversation(actors, workers_connection)

    with pytest.raises(BatchInputInvalid):
        _draft(actors, workers_connection, conversation.pk, text="{oops\n")

    assert not Batch.objects.exists() and not PresetVersion.objects.exists()
