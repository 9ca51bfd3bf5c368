from __future__ import annotations

from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "playground.chat"

    def ready(self) -> None:
        from playground.chat.presets import ConversationPresets
        from playground.providers.presets import preset_source_register

        preset_source_register(ConversationPresets())
