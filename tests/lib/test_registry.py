"""The registry lower floors use to name what features own."""

from __future__ import annotations

import pytest

from playground.chat.registries.presets import ConversationPresets
from playground.chat.registries.sources import ConversationSources
from playground.lib.registry import Registry
from playground.presets import request_presets as presets
from playground.usage import sources


class First:
    pass


class Second:
    pass


def test_a_second_class_for_a_taken_kind_is_refused() -> None:
    registry: Registry[object] = Registry("test")
    registry.register("thing", First())

    with pytest.raises(ValueError, match="'thing' is already registered"):
        registry.register("thing", Second())


def test_the_same_class_registered_again_replaces_the_first_as_a_second_ready_does() -> None:
    registry: Registry[object] = Registry("test")
    registry.register("thing", First())
    again = First()

    registry.register("thing", again)

    assert registry.get("thing") is again
    assert registry.get("other") is None


def test_chat_fills_both_registries_for_conversations_when_django_starts() -> None:
    assert isinstance(sources.resolvers.get(sources.CONVERSATION), ConversationSources)
    assert isinstance(presets.sources.get(sources.CONVERSATION), ConversationPresets)
