"""A conversation's settings offered as a request preset (a batch can start from them).

Registered with `playground.presets.request_presets` for the kind "conversation" in
`ChatConfig.ready`, so the batch pages use them without importing chat. Tools go as they are
sent (no mocks, no returns_json).
"""

from __future__ import annotations

from playground.accounts.selectors import AnyUser
from playground.chat.domain.tools import tools_upstream
from playground.chat.selectors import conversation_get, conversation_page
from playground.presets.request_presets import RequestPreset


class ConversationPresets:
    def choices(self, *, user: AnyUser, limit: int) -> list[tuple[int, str]]:
        # The newest `limit`, read down the per-team index: one LIMIT over all the user's teams
        # at once would sort every conversation they hold.
        return [(c.pk, f"{c} · {c.model_id}") for c in conversation_page(user=user, size=limit).conversations]

    def get(self, *, user: AnyUser, preset_id: int) -> RequestPreset | None:
        conversation = conversation_get(user=user, conversation_id=preset_id)
        if conversation is None:
            return None
        fields: dict[str, object] = {}
        if conversation.tools:
            fields["tools"] = tools_upstream(conversation.tools)
            fields["tool_choice"] = conversation.tool_choice
            fields["parallel_tool_calls"] = conversation.parallel_tool_calls
        if conversation.response_format:
            fields["response_format"] = conversation.response_format
        return RequestPreset(
            id=conversation.pk,
            label=str(conversation),
            system_prompt=conversation.system_prompt,
            parameters=dict(conversation.parameters or {}),
            fields=fields,
        )
