from __future__ import annotations

from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "playground.chat"

    def ready(self) -> None:
        # Below chat, usage and providers name conversations only through these registries.
        from playground.chat.presets import ConversationPresets
        from playground.chat.sources import ComparisonColumnSources, ConversationSources
        from playground.providers import presets
        from playground.usage import sources

        sources.resolvers.register(sources.CONVERSATION, ConversationSources())
        sources.resolvers.register(sources.COMPARISON_COLUMN, ComparisonColumnSources())
        presets.sources.register(sources.CONVERSATION, ConversationPresets())
