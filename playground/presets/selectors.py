"""Reads of presets, always scoped to the acting user's teams: another team's preset or
version is None here, and a 404 in every view."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Max, QuerySet

from playground.accounts.models import ROLES_THAT_CAN_RUN
from playground.accounts.selectors import AnyUser
from playground.presets.models import Preset, PresetVersion
from playground.presets.setup import PresetSetup, setup_from_document


def preset_list(*, user: AnyUser) -> QuerySet[Preset]:
    """The user's teams' presets, most recently saved first, with their newest version number."""
    if not user.is_authenticated:
        return Preset.objects.none()
    return (
        Preset.objects.filter(team__memberships__user_id=user.pk)
        .select_related("team", "created_by")
        .annotate(latest=Max("versions__number"))
    )


def preset_get(*, user: AnyUser, preset_id: int) -> Preset | None:
    return preset_list(user=user).filter(pk=preset_id).first()


def preset_versions(*, preset: Preset) -> QuerySet[PresetVersion]:
    """A preset's versions, newest first (the caller already checked access)."""
    return preset.versions.select_related("created_by", "connection").order_by("-number")


def _versions(user: AnyUser) -> QuerySet[PresetVersion]:
    if not user.is_authenticated:
        return PresetVersion.objects.none()
    return PresetVersion.objects.filter(preset__team__memberships__user_id=user.pk).select_related(
        "preset", "connection"
    )


def preset_version_get(*, user: AnyUser, preset_id: int, number: int) -> PresetVersion | None:
    return _versions(user).filter(preset_id=preset_id, number=number).first()


def version_setup(version: PresetVersion) -> PresetSetup:
    """The setup a version holds (the caller already checked access)."""
    return setup_from_document(
        version.setup,
        connection_id=version.connection_id,
        team_id=version.preset.team_id,
        preset_id=version.preset_id,
        preset_name=version.preset.name,
        version_id=version.pk,
        version_number=version.number,
    )


def preset_version_setup(*, user: AnyUser, version_id: int) -> PresetSetup | None:
    """The setup of version `version_id` if one of the user's teams owns it (None otherwise): what
    a conversation, a batch or a comparison starts from."""
    version = _versions(user).filter(pk=version_id).first()
    return version_setup(version) if version is not None else None


def preset_version_choices(*, user: AnyUser, limit: int = 200) -> list[tuple[int, str]]:
    """(version id, "Preset v2 · model") of the presets the user may run, newest versions first."""
    if not user.is_authenticated:
        return []
    versions = (
        PresetVersion.objects.filter(
            preset__team__memberships__user_id=user.pk,
            preset__team__memberships__role__in=ROLES_THAT_CAN_RUN,
        )
        .select_related("preset")
        .order_by("preset__name", "-number")[:limit]
    )
    return [
        (version.pk, f"{version.preset.name} v{version.number} · {version.model_id}") for version in versions
    ]


def preset_version_labels(*, team_id: int, ids: Iterable[int]) -> dict[int, str]:
    """ "Preset v2" for each of the team's versions among `ids` (another team's id is left out)."""
    wanted = {pk for pk in ids if pk}
    if not wanted:
        return {}
    rows = PresetVersion.objects.filter(pk__in=wanted, preset__team_id=team_id).values_list(
        "pk", "preset__name", "number"
    )
    return {pk: f"{name} v{number}" for pk, name, number in rows}


@dataclass(frozen=True)
class PresetVersionRef:
    label: str  # "Preset v2"
    preset_id: int
    number: int


def preset_version_ref(*, team_id: int, version_id: int | None) -> PresetVersionRef | None:
    """The team's preset version `version_id` (what a record names), for a link to it; None for
    none, a deleted one or another team's."""
    if not version_id:
        return None
    row = (
        PresetVersion.objects.filter(pk=version_id, preset__team_id=team_id)
        .values_list("preset__name", "preset_id", "number")
        .first()
    )
    return PresetVersionRef(f"{row[0]} v{row[2]}", row[1], row[2]) if row is not None else None


def team_version_choices(*, team_id: int) -> list[tuple[int, str]]:
    """Every version of the team's presets, for a filter picker."""
    rows = (
        PresetVersion.objects.filter(preset__team_id=team_id)
        .order_by("preset__name", "-number")
        .values_list("pk", "preset__name", "number")
    )
    return [(pk, f"{name} v{number}") for pk, name, number in rows]
