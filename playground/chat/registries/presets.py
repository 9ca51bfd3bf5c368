"""A conversation's settings offered to start a batch from (as a preset version).

Registered with `playground.presets.request_presets` for the kind "conversation" in
`ChatConfig.ready`, so the batch pages use them without importing chat. The batch saves them as
a version of the preset named after the conversation (its title and id), or reuses an identical
version of any of the team's presets.
"""

from __future__ import annotations

import dataclasses

from playground.accounts.selectors import AnyUser
from playground.chat.selectors import conversation_get, conversation_page, conversation_setup
from playground.presets.models import NAME_MAX_CHARS
from playground.presets.setup import PARAMETER_NAMES, PresetSetup


class ConversationPresets:
    def choices(self, *, user: AnyUser, limit: int) -> list[tuple[int, str]]:
        # The newest `limit`, read down the per-team index: one LIMIT over all the user's teams
        # at once would sort every conversation they hold.
        return [(c.pk, f"{c} · {c.model_id}") for c in conversation_page(user=user, size=limit).conversations]

    def setup(self, *, user: AnyUser, source_id: int) -> PresetSetup | None:
        conversation = conversation_get(user=user, conversation_id=source_id)
        if conversation is None:
            return None
        setup = conversation_setup(conversation)
        suffix = f" · conversation {conversation.pk}" if conversation.title else ""
        return dataclasses.replace(
            setup,
            # A parameter no request takes (left by an older composer) is not part of a preset.
            parameters={name: value for name, value in setup.parameters.items() if name in PARAMETER_NAMES},
            team_id=conversation.team_id,
            preset_name=str(conversation)[: NAME_MAX_CHARS - len(suffix)] + suffix,
        )
