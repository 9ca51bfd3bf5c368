"""The Routing page: the team's routing policy in force, its editor (JSON, or a form for the
common rules), its versions with what each changed, and a dry run."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import User
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from playground.accounts.models import Membership
from playground.lib.web import HtmxHttpRequest
from playground.presets.diff import text_diff
from playground.providers.models import ProviderConnection
from playground.routing.dry_run import routing_dry_run
from playground.routing.models import RoutingPolicy
from playground.routing.plan import Target
from playground.routing.problems import PolicyInvalid, PolicyProblem, RouteUnavailable
from playground.routing.schema import POLICY_SCHEMA
from playground.routing.selectors import (
    routing_budget_used,
    routing_policy_current,
    routing_policy_flags,
    routing_policy_versions,
)
from playground.routing.services import routing_policy_save
from playground.teams.routing_forms import DowngradeRuleForm, DryRunForm, FallbackRuleForm, PolicyDocumentForm
from playground.teams.views.page import ALL_ROLES, redirect_done, team_page, team_view

EXAMPLE = {
    "rules": [
        {
            "name": "fallback",
            "when": {"model": "smart"},
            "strategy": "fallback",
            "on": [429, 500, 502, 503, 504, "timeout", "connect_error"],
            "targets": [{"connection": "CONNECTION", "model": "@cf/moonshotai/kimi-k2.5"}],
        }
    ],
    "retries": {"attempts": 3, "backoff_ms": 200, "max_retry_after_s": 10},
    "cooldown": {"failures": 3, "seconds": 30},
    "auto_affinity": True,
    "sticky_sessions": True,
}


@require_http_methods(["GET", "POST"])
@team_view()
def routing_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    team = membership.team
    current = routing_policy_current(team.pk)
    connections = list(
        ProviderConnection.objects.filter(team=team).order_by("name").values_list("name", flat=True)
    )
    document_form = PolicyDocumentForm(
        initial={"document": _pretty(current.document if current else _example(connections))}
    )
    fallback_form = FallbackRuleForm(connections=connections, prefix="fallback")
    downgrade_form = DowngradeRuleForm(connections=connections, prefix="downgrade")
    problems: list[PolicyProblem] = []
    status = 200
    if request.method == "POST":
        action = request.POST.get("action", "document")
        document: object = None
        note = ""
        if action == "document":
            document_form = PolicyDocumentForm(request.POST)
            if document_form.is_valid():
                document, note = document_form.cleaned_data["document"], document_form.cleaned_data["note"]
        else:
            rule_form: FallbackRuleForm | DowngradeRuleForm
            if action == "fallback":
                rule_form = fallback_form = FallbackRuleForm(
                    request.POST, connections=connections, prefix="fallback"
                )
            else:
                rule_form = downgrade_form = DowngradeRuleForm(
                    request.POST, connections=connections, prefix="downgrade"
                )
            if rule_form.is_valid():
                base = dict(current.document) if current else {}
                document = {**base, "rules": [*base.get("rules", []), rule_form.rule()]}
                note = f"Added the rule {rule_form.cleaned_data['name']!r} with the form."
                document_form = PolicyDocumentForm(initial={"document": _pretty(document)})
        if document is not None:
            try:
                assert isinstance(request.user, User)  # team_view: signed in
                saved = routing_policy_save(team=team, document=document, user=request.user, note=note)
            except PolicyInvalid as invalid:
                problems = invalid.problems
                if action != "document":  # the form's rule, in the editor, with what is wrong with it
                    document_form = PolicyDocumentForm(initial={"document": _pretty(document), "note": note})
            else:
                return redirect_done(
                    request, f"Version {saved.version} is in force.", "teams:routing", team.pk
                )
        status = 400
    context = {
        "current": current,
        "flags": routing_policy_flags(team.pk),
        "document_form": document_form,
        "fallback_form": fallback_form,
        "downgrade_form": downgrade_form,
        "problems": problems,
        "versions": _versions(team.pk),
        "dry_run_form": DryRunForm(initial={"model": "@cf/moonshotai/kimi-k2.5"}),
        "has_connections": bool(connections),
    }
    return team_page(request, membership, "teams/routing.html", context, status=status)


@require_POST
@team_view(write=ALL_ROLES)  # a dry run changes nothing: anyone who may read the page may run one
def routing_dry_run_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    team = membership.team
    form = DryRunForm(request.POST)
    context: dict[str, Any] = {"dry_run_form": form, "team": team}
    status = 400
    if form.is_valid():
        connection = ProviderConnection.objects.filter(team=team).order_by("-is_default", "name").first()
        if connection is None:
            context["dry_run_error"] = "The team has no connection yet: add one on the Connections page."
        else:
            sample = form.sample(
                budget_used_now=routing_budget_used(team_id=team.pk, key_id=None, key_limit=None)
            )
            default = Target(connection.pk, connection.name, sample.model)
            try:
                context["run"] = routing_dry_run(team_id=team.pk, default=default, sample=sample)
                context["default"] = default
                status = 200
            except RouteUnavailable as exc:
                context["dry_run_error"] = str(exc)
    return render(request, "teams/routing_dry_run.html", context, status=status)


@require_GET
@team_view()
def routing_schema_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    return JsonResponse(
        POLICY_SCHEMA, content_type="application/schema+json", json_dumps_params={"indent": 2}
    )


def _versions(team_id: int) -> list[dict[str, Any]]:
    """Each version, newest first, with its diff from the one before."""
    versions = list(routing_policy_versions(team_id)[:20])
    rows = []
    for index, version in enumerate(versions):
        before: RoutingPolicy | None = versions[index + 1] if index + 1 < len(versions) else None
        diff = (
            text_diff("policy", "Policy", _pretty(before.document), _pretty(version.document))
            if before is not None
            else None
        )
        rows.append({"version": version, "diff": diff})
    return rows


def _pretty(document: object) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)


def _example(connections: list[str]) -> dict[str, Any]:
    """A starting document naming the team's first connection."""
    example: dict[str, Any] = json.loads(json.dumps(EXAMPLE))
    example["rules"][0]["targets"][0]["connection"] = connections[0] if connections else "CONNECTION"
    return example
