"""Compare pages: start a comparison (from a conversation or a blank page), see it with its turns
and run history, price its next turn, continue a column.

The answers stream over the comparison's socket (`compare.socket`), which also takes the next
turns; these views only store and show. Every lookup is scoped to the user's teams: another
team's comparison, column or source conversation is a 404.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from playground.accounts.permissions import user_can_run
from playground.chat.compare.choices import TargetChoices, target_choices
from playground.chat.compare.forms import TARGET_SLOTS, CompareForm, CompareTargetForm, target_value
from playground.chat.compare.preflight import comparison_preflight, draft_preflight
from playground.chat.compare.presenters import comparison_page
from playground.chat.compare.selectors import comparison_get, comparison_recent
from playground.chat.compare.services import (
    MAX_TARGETS,
    ComparisonNotFound,
    Target,
    comparison_continue,
    comparison_create,
    comparison_draft,
)
from playground.chat.models import Conversation
from playground.chat.sockets.paths import compare_socket_path
from playground.chat.views.lookups import conversation_or_404, found_or_404
from playground.lib.web import HtmxHttpRequest, refusal
from playground.presets.selectors import preset_version_setup
from playground.presets.setup import PresetSetup
from playground.presets.variables import Variable, variables_declared, variables_read
from playground.providers.selectors import connection_list_runnable

VALUE_FIELD = "var-"  # a prompt variable's value on the form: `var-<name>`


@never_cache
@login_required
@require_GET
def comparison_new_view(request: HtmxHttpRequest) -> HttpResponse:
    """The compare form: `?conversation=<id>` takes that conversation's setup and target,
    `?preset_version=<id>` that preset version's."""
    source = _source_or_404(request, request.GET.get("conversation", ""))
    preset = None if source else _preset_or_404(request, request.GET.get("preset_version", ""))
    connections = list(connection_list_runnable(user=request.user))
    choices = target_choices(connections)
    form = CompareForm(
        initial={
            "conversation": source.pk if source else None,
            "preset_version": preset.version_id if preset else None,
        }
    )
    targets = [
        CompareTargetForm(prefix=f"t{slot}", targets=choices, initial=initial)
        for slot, initial in enumerate(_initial_targets(_seed(source, preset), choices))
    ]
    return _form_page(request, form=form, targets=targets, source=source, preset=preset)


@login_required
@require_POST
def comparison_create_view(request: HtmxHttpRequest) -> HttpResponse:
    posted = _posted(request)
    if posted.valid:
        try:
            comparison = comparison_create(user=request.user, **posted.fields())
        except ValidationError as exc:
            _errors_add(exc, form=posted.form, targets=posted.chosen)
        except PermissionDenied as exc:
            posted.form.add_error(None, str(exc) or "You may not send requests in this team.")
        else:
            return redirect("chat:comparison-detail", comparison_id=comparison.pk)
    return _form_page(
        request,
        form=posted.form,
        targets=posted.targets,
        source=posted.source,
        preset=posted.preset,
        values=posted.values,
        status=400,
    )


@login_required
@require_POST
def comparison_draft_preflight_view(request: HtmxHttpRequest) -> HttpResponse:
    """The first turn's cost per target and in all, for the form as it stands (htmx posts it as
    the user fills it in); a hint while the form cannot be priced yet."""
    posted = _posted(request)
    problem = "Type the prompt and choose two targets or more to see what the first turn costs."
    if posted.valid:
        try:
            draft = comparison_draft(user=request.user, **posted.fields())
        except (ValidationError, PermissionDenied):
            pass  # Compare says why, beside the fields
        else:
            preflight = draft_preflight(draft=draft, sender_id=request.user.pk)
            context = {"preflight": preflight, "team": draft.comparison.team, "first": True}
            return render(request, "chat/compare_preflight.html", context)
    return render(request, "chat/compare_preflight.html", {"problem": problem})


@never_cache  # live data: going back must not show a copy without its answers
@login_required
@require_GET
def comparison_detail_view(request: HtmxHttpRequest, comparison_id: int) -> HttpResponse:
    comparison = found_or_404(comparison_get(user=request.user, comparison_id=comparison_id), "comparison")
    can_run = user_can_run(user=request.user, team_id=comparison.team_id)
    context = {
        "comparison": comparison,
        "comparison_id": comparison.pk,
        "page": comparison_page(comparison),
        "socket_path": compare_socket_path(comparison.pk),
        "can_run": can_run,  # viewers see the turns; only those who may send open the socket
        "read_only": not can_run,
        "autorun": can_run and comparison.runs == 0,
    }
    return render(request, "chat/compare_detail.html", context)


@login_required
@require_POST
def comparison_preflight_view(request: HtmxHttpRequest, comparison_id: int) -> HttpResponse:
    """The next turn's cost per column and in all, for the draft in the form (htmx posts it as
    the user types)."""
    comparison = found_or_404(comparison_get(user=request.user, comparison_id=comparison_id), "comparison")
    preflight = comparison_preflight(
        comparison=comparison, sender_id=request.user.pk, text=request.POST.get("message", "")
    )
    return render(request, "chat/compare_preflight.html", {"preflight": preflight, "team": comparison.team})


@login_required
@require_POST
def comparison_continue_view(request: HtmxHttpRequest, comparison_id: int, column_id: int) -> HttpResponse:
    """Continue with this one: the column as a conversation, which opens."""
    try:
        conversation = comparison_continue(
            user=request.user, comparison_id=comparison_id, column_id=column_id
        )
    except ComparisonNotFound:
        raise Http404("No such column.") from None
    except ValidationError as exc:
        return refusal(request, " ".join(exc.messages))
    if request.htmx:
        return HttpResponseClientRedirect(reverse("chat:conversation-detail", args=[conversation.pk]))
    return redirect("chat:conversation-detail", conversation_id=conversation.pk)


# --- helpers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Posted:
    """The compare form as posted: the prompt's form, one form per target slot, where its setup
    comes from, and the targets chosen (once every form is valid)."""

    form: CompareForm
    targets: list[CompareTargetForm]
    source: Conversation | None
    preset: PresetSetup | None
    valid: bool
    chosen: list[CompareTargetForm]
    values: dict[str, str]  # the prompt variables' values typed on the form (`var-<name>`)

    def fields(self) -> dict[str, Any]:
        """What `comparison_create` and `comparison_draft` take (the forms are valid)."""
        return {
            "prompt": self.form.cleaned_data["prompt"],
            "system_prompt": self.form.cleaned_data["system_prompt"],
            "conversation_id": self.source.pk if self.source else None,
            "preset_version_id": self.preset.version_id if self.preset else None,
            "targets": [_target(target) for target in self.chosen],
            "variable_values": self.values,
        }


def _posted(request: HtmxHttpRequest) -> _Posted:
    form = CompareForm(request.POST)
    source = _source_or_404(request, request.POST.get("conversation", ""))
    preset = None if source else _preset_or_404(request, request.POST.get("preset_version", ""))
    choices = target_choices(list(connection_list_runnable(user=request.user)))
    targets = [
        CompareTargetForm(request.POST, prefix=f"t{slot}", targets=choices) for slot in range(TARGET_SLOTS)
    ]
    valid = all([form.is_valid(), *(target.is_valid() for target in targets)])
    chosen = [target for target in targets if valid and target.chosen() is not None]
    values = {
        key.removeprefix(VALUE_FIELD): request.POST.get(key, "")
        for key in request.POST
        if key.startswith(VALUE_FIELD)
    }
    return _Posted(form, targets, source, preset, valid, chosen, values)


def _source_or_404(request: HtmxHttpRequest, raw: str) -> Conversation | None:
    """The conversation a comparison starts from (none on a blank page); another team's is a 404."""
    return conversation_or_404(request, raw) if raw else None


@dataclass(frozen=True)
class _Seed:
    """The target a comparison's form starts with: its conversation's or preset version's."""

    connection_id: int | None
    model_id: str
    parameters: dict[str, Any]
    use_affinity: bool


def _seed(source: Conversation | None, preset: PresetSetup | None) -> _Seed | None:
    if source is not None:
        return _Seed(source.connection_id, source.model_id, source.parameters or {}, source.use_affinity)
    if preset is not None:
        return _Seed(preset.connection.id, preset.model_id, preset.parameters, preset.use_affinity)
    return None


def _preset_or_404(request: HtmxHttpRequest, raw: str) -> PresetSetup | None:
    """The preset version a comparison starts from, if any; another team's is a 404."""
    if not raw:
        return None
    preset = preset_version_setup(user=request.user, version_id=int(raw)) if raw.isdigit() else None
    if preset is None:
        raise Http404("No such preset version.")
    return preset


def _initial_targets(seed: _Seed | None, choices: TargetChoices) -> list[dict[str, Any]]:
    """The form's columns: the conversation's (or preset version's) own target first, else the
    engine's default model; then the next models on offer, so two differ from the start."""
    values = [value for _, options in choices for value, _ in options]
    if seed is not None and seed.connection_id is not None:
        first = target_value(seed.connection_id, seed.model_id)
        parameters = seed.parameters
        initial: dict[str, Any] = {
            "target": first,
            "temperature": parameters.get("temperature"),
            "max_tokens": parameters.get("max_tokens"),
            "use_affinity": seed.use_affinity,
        }
    else:
        default = next(
            (v for v in values if v.endswith(f":{settings.ENGINE_MODEL_ID}")), values[0] if values else ""
        )
        first, initial = default, {"target": default, "use_affinity": True}
    others = [value for value in values if value != first]
    second = {"target": others[0] if others else first, "use_affinity": True}
    return [initial, second, *({"use_affinity": True} for _ in range(TARGET_SLOTS - 2))]


def _target(form: CompareTargetForm) -> Target:
    chosen = form.chosen()
    assert chosen is not None
    connection_id, model_id = chosen
    return Target(
        connection_id=connection_id,
        model_id=model_id,
        parameters=form.parameters(),
        use_affinity=form.cleaned_data["use_affinity"],
    )


def _errors_add(exc: ValidationError, *, form: CompareForm, targets: list[CompareTargetForm]) -> None:
    """The service's errors beside their fields: `<n>-<field>` belongs to the n-th chosen target."""
    for key, messages in exc.message_dict.items():
        position, _, name = key.partition("-")
        if position.isdigit() and int(position) < len(targets):
            target = targets[int(position)]
            target.add_error(name if name in target.fields else "target", messages)
        elif key in form.fields:
            form.add_error(key, messages)
        else:
            form.add_error(None, messages)


def _variables_shown(
    form: CompareForm, source: Conversation | None, preset: PresetSetup | None, values: dict[str, str]
) -> list[Variable]:
    """The prompt variables the form asks values for: its source's (a blank page's: the
    placeholders of the system prompt typed there), with the values typed over theirs."""
    if source is not None:
        declared = variables_read(source.variables)
    elif preset is not None:
        declared = variables_read(preset.variables)
    else:
        declared = variables_declared([], [str(form["system_prompt"].value() or "")])
    return [Variable(v.name, v.type, values.get(v.name, v.value)) for v in declared]


def _form_page(
    request: HtmxHttpRequest,
    *,
    form: CompareForm,
    targets: list[CompareTargetForm],
    source: Conversation | None,
    preset: PresetSetup | None = None,
    values: dict[str, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "form": form,
        "targets": targets,
        "source": source,
        "preset": preset,
        "variables": _variables_shown(form, source, preset, values or {}),
        "value_field": VALUE_FIELD,
        "max_targets": MAX_TARGETS,
        "recent": comparison_recent(user=request.user),
    }
    return render(request, "chat/compare_new.html", context, status=status)
