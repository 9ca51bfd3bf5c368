"""Drafts: a batch started from a conversation carries its settings, whoever calls the service."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from playground.batches.inputs import Shared, utf8_lines
from playground.batches.models import Batch
from playground.batches.services.drafts import BatchInput, batch_draft_create
from playground.chat.models import Conversation
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
    actors: Actors, connection: ProviderConnection, conversation_id: int, system_prompt: str = ""
) -> Batch:
    return batch_draft_create(
        user=actors.owner,
        connection_id=connection.pk,
        model_id=SCHEMA_MODEL,
        from_conversation_id=conversation_id,
        source=BatchInput(
            kind="jsonl", stream=utf8_lines(jsonl(prompts(1))), shared=Shared(system_prompt=system_prompt)
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
