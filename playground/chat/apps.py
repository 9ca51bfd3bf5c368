from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate


class ChatConfig(AppConfig):
    name = "playground.chat"

    def ready(self) -> None:
        # Below chat, usage and providers name conversations only through these registries.
        from playground.chat.registries.erasure import ChatEraser
        from playground.chat.registries.presets import ConversationPresets
        from playground.chat.registries.sources import ComparisonColumnSources, ConversationSources
        from playground.presets import request_presets
        from playground.usage import erasure, sources

        sources.resolvers.register(sources.CONVERSATION, ConversationSources())
        sources.resolvers.register(sources.COMPARISON_COLUMN, ComparisonColumnSources())
        request_presets.sources.register(sources.CONVERSATION, ConversationPresets())
        erasure.erasers.register("chat", ChatEraser())
        post_migrate.connect(_search_index_ensure, sender=self)


def _search_index_ensure(*, using: str, plan: Any = None, **kwargs: Any) -> None:
    """After every `migrate`: the search index exists and its triggers survived the migrations
    (see `chat.search.index`)."""
    from playground.chat.search.index import search_index_ensure

    search_index_ensure(connections[using])
