"""Preset fixtures: a conversation with a full setup on the fake Workers AI connection, saved as v1."""

from __future__ import annotations

from typing import Any

import pytest

from playground.chat.models import Conversation
from playground.chat.services.conversations import conversation_create
from playground.chat.services.preset_setups import conversation_preset_save
from playground.presets.models import PresetVersion
from playground.providers.models import ProviderConnection
from tests.support.actors import Actors
from tests.support.batches import NO_QUEUE_MODEL

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    "mocks": ["18 °C, clear"],
}


@pytest.fixture
def set_up_conversation(actors: Actors, workers_connection: ProviderConnection) -> Conversation:
    """The teammate's conversation with a system prompt, a tool and its mock, a tool choice,
    a JSON response format, parameters and affinity off."""
    conversation = conversation_create(
        user=actors.teammate,
        connection_id=workers_connection.pk,
        model_id=NO_QUEUE_MODEL,
        system_prompt="Answer in French.",
        use_affinity=False,
    )
    conversation.tools = [WEATHER_TOOL]
    conversation.tool_choice = {"type": "function", "function": {"name": "get_weather"}}
    conversation.response_format = {"type": "json_object"}
    conversation.parameters = {"temperature": 0.2, "max_tokens": 64}
    conversation.save()
    return conversation


@pytest.fixture
def version_one(actors: Actors, set_up_conversation: Conversation) -> PresetVersion:
    return conversation_preset_save(
        user=actors.teammate, conversation_id=set_up_conversation.pk, preset_id=None, name="Triage"
    )
