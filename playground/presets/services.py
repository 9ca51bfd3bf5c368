"""Saving presets: a new version from a setup (a conversation's), or from an imported file; or,
to start a batch from a conversation, an identical version reused.

Who may save: whoever may run requests in the team (owners, admins and members); viewers read
and export. A version is never changed once written; saving again adds the next number.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max

from playground.accounts.permissions import require_run_role
from playground.presets.models import NAME_MAX_CHARS, Preset, PresetVersion
from playground.presets.setup import (
    ConnectionRef,
    PresetInvalid,
    PresetSetup,
    preset_file_parse,
    setup_document_problems,
    setup_from_document,
)
from playground.providers.json_problems import Issue
from playground.providers.models import ProviderConnection


class PresetNotFound(Exception):
    """No such preset in the team (answered as 404)."""


def preset_version_save(
    *,
    user: User,
    team_id: int,
    setup: PresetSetup,
    preset_id: int | None = None,
    name: str = "",
    note: str = "",
) -> PresetVersion:
    """Save `setup` as the next version of preset `preset_id`, or as version 1 of a new preset
    called `name`. Raises `PermissionDenied` (viewers), `PresetNotFound` (another team's preset),
    `PresetInvalid` (the setup) or `ValidationError` (the name; a setup equal to the newest
    version's, which would be a version that changes nothing)."""
    require_run_role(user=user, team_id=team_id)
    problems = setup_document_problems(setup.document())
    if problems:
        raise PresetInvalid(problems)
    connection = setup.connection.id
    if (
        connection is not None
        and not ProviderConnection.objects.filter(pk=connection, team_id=team_id).exists()
    ):
        raise PresetInvalid([Issue("$.setup.connection", "That connection is not this team's.")])
    with transaction.atomic():
        preset = _preset_for_save(user=user, team_id=team_id, preset_id=preset_id, name=name)
        newest = preset.versions.order_by("-number").first()
        if newest is not None and newest.setup == setup.document() and newest.connection_id == connection:
            raise ValidationError(f"Nothing changed since v{newest.number}: this setup is that version.")
        number = (preset.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        version = PresetVersion.objects.create(
            preset=preset,
            number=number,
            connection_id=connection,
            model_id=setup.model_id,
            setup=setup.document(),
            note=note.strip()[:200],
            created_by=user,
        )
        preset.save(update_fields=["updated_at"])
    return version


def preset_version_reuse_or_save(*, user: User, setup: PresetSetup, note: str = "") -> PresetVersion:
    """A version with `setup` (its connection, model and document): the team's newest identical
    one, else `setup` saved as the next version of the team's preset `setup.preset_name` (version
    1 of a new preset when the team has none by that name). What starts a batch from a
    conversation: starting it twice from unchanged settings names one version, not two. Raises
    what `preset_version_save` raises."""
    assert setup.team_id is not None, "a setup to save names its team"
    require_run_role(user=user, team_id=setup.team_id)
    document = setup.document()
    same_run = PresetVersion.objects.filter(
        preset__team_id=setup.team_id, connection_id=setup.connection.id, model_id=setup.model_id
    )
    for version in same_run.order_by("-created_at", "-id").only("setup"):
        if version.setup == document:
            return version
    named = Preset.objects.filter(team_id=setup.team_id, name=setup.preset_name)
    preset_id = named.values_list("pk", flat=True).first()
    return preset_version_save(
        user=user, team_id=setup.team_id, setup=setup, preset_id=preset_id, name=setup.preset_name, note=note
    )


def _preset_for_save(*, user: User, team_id: int, preset_id: int | None, name: str) -> Preset:
    if preset_id is not None:
        # Locked, so two saves at once number their versions one after the other.
        preset = Preset.objects.select_for_update().filter(pk=preset_id, team_id=team_id).first()
        if preset is None:
            raise PresetNotFound(preset_id)
        return preset
    name = name.strip()
    if not name:
        raise ValidationError({"name": "Name the preset, or choose one to save a new version of."})
    if len(name) > NAME_MAX_CHARS:
        raise ValidationError({"name": f"At most {NAME_MAX_CHARS} characters."})
    if Preset.objects.filter(team_id=team_id, name=name).exists():
        raise ValidationError(
            {"name": f"This team already has a preset named {name!r}: choose it to add a version."}
        )
    try:
        with transaction.atomic():
            return Preset.objects.create(team_id=team_id, name=name, created_by=user)
    except IntegrityError:  # saved by someone else meanwhile
        raise ValidationError({"name": f"This team already has a preset named {name!r}."}) from None


def preset_import(
    *,
    user: User,
    team_id: int,
    text: str,
    preset_id: int | None = None,
    connection_id: int | None = None,
) -> PresetVersion:
    """A preset file as a new preset of the team (named as in the file), or as the next version
    of `preset_id`. The connection is `connection_id` (one of the team's) or the team's
    connection named in the file. Raises `PresetInvalid` with every problem at its JSON path,
    and what `preset_version_save` raises."""
    require_run_role(user=user, team_id=team_id)
    imported = preset_file_parse(text)
    connection = _import_connection(
        team_id=team_id, named=imported.document["connection"], chosen=connection_id
    )
    document = {**imported.document, "connection": {"name": connection.name, "kind": connection.kind}}
    setup = setup_from_document(document, connection_id=connection.pk)
    return preset_version_save(
        user=user,
        team_id=team_id,
        setup=setup,
        preset_id=preset_id,
        name="" if preset_id is not None else imported.name,
        note=imported.note,
    )


def _import_connection(*, team_id: int, named: dict[str, str], chosen: int | None) -> ProviderConnection:
    connections = ProviderConnection.objects.filter(team_id=team_id)
    if chosen is not None:
        connection = connections.filter(pk=chosen).first()
        if connection is None:
            raise ValidationError({"connection": "Choose one of this team's connections."})
        return connection
    connection = connections.filter(name=named["name"]).first()
    if connection is None:
        raise PresetInvalid(
            [
                Issue(
                    "$.setup.connection",
                    f"This team has no connection named {named['name']!r} "
                    f"({named.get('kind') or 'any kind'}): choose the connection to use below.",
                )
            ]
        )
    return connection


def connection_ref(connection: ProviderConnection) -> ConnectionRef:
    return ConnectionRef(id=connection.pk, name=connection.name, kind=connection.kind)
