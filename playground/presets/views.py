"""Preset pages: the team's presets, one preset's versions, a diff of two, import and export.

Thin views over `selectors` and `services`. Every lookup is scoped to the user's teams, so
another team's preset or version is a 404 on every path. Starting a conversation or a batch
from a version is the chat's and the batches' own action (their URLs, their services).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.text import slugify
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from playground.accounts.models import ROLES_THAT_CAN_RUN, Membership
from playground.accounts.permissions import user_can_run
from playground.lib.web import HtmxHttpRequest, form_errors_add
from playground.presets.diff import setups_diff
from playground.presets.forms import PresetImportForm
from playground.presets.models import Preset, PresetVersion
from playground.presets.selectors import (
    preset_get,
    preset_list,
    preset_version_get,
    preset_versions,
    version_setup,
)
from playground.presets.services import PresetNotFound, preset_import
from playground.presets.setup import PresetInvalid, export_document, export_text
from playground.providers.models import ProviderConnection
from playground.providers.selectors import connection_list


def _preset_or_404(request: HtmxHttpRequest, preset_id: int) -> Preset:
    preset = preset_get(user=request.user, preset_id=preset_id)
    if preset is None:
        raise Http404("No such preset.")
    return preset


def _version_or_404(request: HtmxHttpRequest, preset_id: int, number: int) -> PresetVersion:
    version = preset_version_get(user=request.user, preset_id=preset_id, number=number)
    if version is None:
        raise Http404("No such preset version.")
    return version


def _saving_teams(request: HtmxHttpRequest) -> list[tuple[int, str]]:
    """The teams where the user may save presets (those where they may run requests)."""
    return list(
        Membership.objects.filter(user_id=request.user.pk, role__in=ROLES_THAT_CAN_RUN)
        .order_by("team__name")
        .values_list("team_id", "team__name")
    )


def _connection_choices(request: HtmxHttpRequest, team_id: int | None = None) -> list[tuple[int, str]]:
    connections = connection_list(user=request.user).order_by("team__name", "name")
    if team_id is not None:
        connections = connections.filter(team_id=team_id)
    return [(c.pk, f"{c.team.name} · {c.name} ({c.spec.label})") for c in connections]


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def preset_list_view(request: HtmxHttpRequest) -> HttpResponse:
    """The presets of the user's teams, and the import of a file as a new preset."""
    teams = _saving_teams(request)
    form = PresetImportForm(
        request.POST or None, request.FILES or None, teams=teams, connections=_connection_choices(request)
    )
    if request.method == "POST" and form.is_valid():
        version = _import(
            request, form, team_id=form.cleaned_data.get("team") or (teams[0][0] if teams else 0)
        )
        if version is not None:
            return redirect("presets:preset-detail", preset_id=version.preset_id)
    context = {
        "presets": preset_list(user=request.user).order_by("-updated_at", "-id"),
        "form": form,
        "can_save": bool(teams),
    }
    return render(request, "presets/preset_list.html", context, status=400 if form.is_bound else 200)


def _import(
    request: HtmxHttpRequest, form: PresetImportForm, *, team_id: int, preset_id: int | None = None
) -> PresetVersion | None:
    """Import the form's file; on a refusal, the problems go on the form and the text stays in it."""
    text = form.document_text()
    data = request.POST.copy()
    data["text"] = text  # an uploaded file's text is shown for fixing, like a pasted one
    form.data = data
    connection = form.cleaned_data.get("connection")
    if (
        connection is not None
        and not ProviderConnection.objects.filter(pk=connection, team_id=team_id).exists()
    ):
        form.add_error("connection", "Choose one of this team's connections.")
        return None
    try:
        return preset_import(
            user=request.user, team_id=team_id, text=text, preset_id=preset_id, connection_id=connection
        )
    except PresetInvalid as exc:
        form.add_error("text", [f"{problem.path}: {problem.message}" for problem in exc.problems])
    except PresetNotFound:
        raise Http404("No such preset.") from None
    except ValidationError as exc:
        form_errors_add(form, exc)
    except PermissionDenied as exc:
        form.add_error(None, str(exc))
    return None


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def preset_detail_view(request: HtmxHttpRequest, preset_id: int) -> HttpResponse:
    """One preset: its versions (newest first, the newest's setup shown), actions on each, and the
    import of a file as its next version."""
    preset = _preset_or_404(request, preset_id)
    can_run = user_can_run(user=request.user, team_id=preset.team_id)
    form = PresetImportForm(
        request.POST or None,
        request.FILES or None,
        teams=None,
        connections=_connection_choices(request, team_id=preset.team_id),
    )
    if request.method == "POST":
        if not can_run:
            raise PermissionDenied("Viewers can read and export presets but not save them.")
        if form.is_valid() and _import(request, form, team_id=preset.team_id, preset_id=preset.pk):
            return redirect("presets:preset-detail", preset_id=preset.pk)
    versions = list(preset_versions(preset=preset))
    newest = versions[0] if versions else None
    context: dict[str, Any] = {
        "preset": preset,
        "versions": versions,
        "newest": newest,
        "newest_json": export_text(newest.setup) if newest else "",
        "can_run": can_run,
        "form": form,
    }
    return render(request, "presets/preset_detail.html", context, status=400 if form.is_bound else 200)


@never_cache
@login_required
@require_GET
def version_diff_view(request: HtmxHttpRequest, preset_id: int) -> HttpResponse:
    """Two versions field by field: side by side (`?view=side`), unified (`?view=unified`), or by
    default side by side on a wide screen and unified on a phone."""
    preset = _preset_or_404(request, preset_id)
    numbers = list(preset.versions.order_by("-number").values_list("number", flat=True))
    try:
        new = int(request.GET.get("new") or numbers[0])
        old = int(request.GET.get("old") or (numbers[1] if len(numbers) > 1 else new))
    except (ValueError, IndexError):
        raise Http404("No such preset version.") from None
    old_version, new_version = (
        _version_or_404(request, preset_id, old),
        _version_or_404(request, preset_id, new),
    )
    fields = setups_diff(old_version.setup, new_version.setup)
    context = {
        "preset": preset,
        "old": old_version,
        "new": new_version,
        "numbers": numbers,
        "fields": fields,
        "changed": [field for field in fields if field.changed],
        "view": request.GET.get("view") if request.GET.get("view") in ("side", "unified") else "",
    }
    return render(request, "presets/version_diff.html", context)


@never_cache
@login_required
@require_GET
def version_export_view(request: HtmxHttpRequest, preset_id: int, number: int) -> HttpResponse:
    """The version as a JSON file, importable here or into another team."""
    version = _version_or_404(request, preset_id, number)
    document = export_document(
        name=version.preset.name, number=version.number, note=version.note, setup=version_setup(version)
    )
    response = HttpResponse(export_text(document), content_type="application/json; charset=utf-8")
    filename = f"preset-{slugify(version.preset.name) or version.preset_id}-v{version.number}.json"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
