"""A conversation and the team's presets: save its setup as a preset version, start one from a version.

A conversation names the version whose setup it has (`Conversation.preset_version`), and its
turns' usage records name it too: so it is set when the conversation starts from a version or
is saved as one, and cleared when one of its settings changes (`services.conversations._setup_save`).
"""

from __future__ import annotations

import uuid

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from playground.chat.models import Conversation
from playground.chat.selectors import conversation_setup
from playground.chat.services.conversations import conversation_for_run
from playground.presets.models import PresetVersion
from playground.presets.selectors import preset_version_setup
from playground.presets.services import preset_version_save
from playground.providers.connection_check import connection_model_check
from playground.providers.selectors import connection_for_run


class PresetVersionNotFound(Exception):
    """No such version in the user's teams (answered as 404)."""


def conversation_preset_save(
    *, user: User, conversation_id: int, preset_id: int | None, name: str = "", note: str = ""
) -> PresetVersion:
    """Save the conversation's setup as the next version of `preset_id` (one of its team's) or as
    a new preset `name`; the conversation then names that version. Raises `ConversationNotFound`,
    `PermissionDenied`, `ValidationError` (incl. `PresetInvalid`) or `PresetNotFound`."""
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    if conversation.connection is None:
        raise ValidationError("This conversation's connection was deleted: a preset needs one.")
    version = preset_version_save(
        user=user,
        team_id=conversation.team_id,
        setup=conversation_setup(conversation),
        preset_id=preset_id,
        name=name,
        note=note,
    )
    Conversation.objects.filter(pk=conversation.pk).update(preset_version=version)
    return version


def conversation_from_preset(*, user: User, version_id: int) -> Conversation:
    """A new conversation with the version's setup. Raises `PresetVersionNotFound` (another
    team's), `PermissionDenied` (viewers) or `ValidationError` (its connection was deleted, or no
    longer serves its model)."""
    setup = preset_version_setup(user=user, version_id=version_id)
    if setup is None:
        raise PresetVersionNotFound(version_id)
    if setup.connection.id is None:
        raise ValidationError(
            f"This version's connection ({setup.connection.name}) was deleted: import it again with another."
        )
    connection, model_id = connection_for_run(
        user=user, connection_id=setup.connection.id, model_id=setup.model_id
    )
    connection_model_check(connection=connection, model_id=model_id)
    return Conversation.objects.create(
        team_id=connection.team_id,
        user=user,
        connection=connection,
        model_id=model_id,
        system_prompt=setup.system_prompt,
        variables=setup.variables,
        use_affinity=setup.use_affinity,
        affinity_key=f"pg-{uuid.uuid4().hex}",
        parameters=setup.parameters,
        tools=setup.tools,
        tool_choice=setup.tool_choice,
        parallel_tool_calls=setup.parallel_tool_calls,
        auto_mock_steps=setup.auto_mock_steps,
        response_format=setup.response_format,
        preset_version_id=setup.version_id,
    )
