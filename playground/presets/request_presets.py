"""Request presets: settings one feature offers another to start a batch from.

A conversation's settings can start a batch, but features never import each other (see the
design's floors). So the chat app registers a `PresetSource` here for its kind
("conversation") when Django starts (`ChatConfig.ready`), as features register what caused
usage records (`playground.usage.sources`), and the batch pages read it through this module.
A source hands over its settings as a `PresetSetup`, not yet saved: the batch saves it as a
preset version, or reuses an identical one (`presets.services.preset_version_reuse_or_save`),
so every batch starts from a version, one way. A kind that no app registered offers nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from playground.accounts.selectors import AnyUser
from playground.lib.registry import Registry

if TYPE_CHECKING:
    from playground.presets.setup import PresetSetup
    from playground.presets.variables import Variable


@dataclass(frozen=True)
class RequestPreset:
    """The request fields a batch's items carry, read from a setup (`PresetSetup.request_preset`)."""

    id: int
    label: str
    system_prompt: str = ""
    variables: tuple[Variable, ...] = ()  # with their default values; a line's own win
    parameters: Mapping[str, Any] = field(default_factory=dict)  # as stored; the caller filters by kind
    fields: Mapping[str, Any] = field(default_factory=dict)  # tools as sent, tool_choice, response_format


class PresetSource(Protocol):
    def choices(self, *, user: AnyUser, limit: int) -> list[tuple[int, str]]:
        """(id, label) of what `user` may start from, newest first."""
        ...

    def setup(self, *, user: AnyUser, source_id: int) -> PresetSetup | None:
        """Its settings if `user` may use them (another team's is None), with the `team_id` and
        the `preset_name` a version of them is saved under."""
        ...


sources: Registry[PresetSource] = Registry("request preset")


def preset_choices(*, kind: str, user: AnyUser, limit: int = 100) -> list[tuple[int, str]]:
    source = sources.get(kind)
    return source.choices(user=user, limit=limit) if source is not None else []


def preset_source_setup(*, kind: str, user: AnyUser, source_id: int) -> PresetSetup | None:
    source = sources.get(kind)
    return source.setup(user=user, source_id=source_id) if source is not None else None
