"""Request presets: saved request settings that one feature offers to another.

A conversation's composer settings can seed a batch, but features never import each other
(see the design's floors). So the chat app registers a `PresetSource` here for its kind
("conversation") when Django starts (`ChatConfig.ready`), as features register what caused
usage records (`playground.usage.sources`), and the batch pages read presets through this
module. The settings are `ChatRequest` fields, which is this floor's vocabulary. A kind that
no app registered offers no presets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from playground.accounts.selectors import AnyUser
from playground.lib.registry import Registry


@dataclass(frozen=True)
class RequestPreset:
    id: int
    label: str
    system_prompt: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)  # as stored; the caller filters by kind
    fields: Mapping[str, Any] = field(default_factory=dict)  # tools as sent, tool_choice, response_format


class PresetSource(Protocol):
    def choices(self, *, user: AnyUser, limit: int) -> list[tuple[int, str]]:
        """(id, label) of the presets `user` may use, newest first."""
        ...

    def get(self, *, user: AnyUser, preset_id: int) -> RequestPreset | None:
        """The preset if `user` may use it (another team's is None)."""
        ...


sources: Registry[PresetSource] = Registry("request preset")


def preset_choices(*, kind: str, user: AnyUser, limit: int = 100) -> list[tuple[int, str]]:
    source = sources.get(kind)
    return source.choices(user=user, limit=limit) if source is not None else []


def preset_get(*, kind: str, user: AnyUser, preset_id: int) -> RequestPreset | None:
    source = sources.get(kind)
    return source.get(user=user, preset_id=preset_id) if source is not None else None
