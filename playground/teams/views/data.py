"""The team's Data page: what the records of its requests keep of their text, and whether its
requests go upstream redacted (issue 37)."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.views.decorators.http import require_http_methods

from playground.accounts.models import Membership, Role
from playground.lib.web import HtmxHttpRequest, form_errors_add
from playground.teams.api_key_selectors import api_keys_unrevoked
from playground.teams.forms import TeamStoreForm, UpstreamRedactionForm
from playground.teams.services.storage import team_store_mode_update, team_upstream_redaction_update
from playground.teams.views.page import redirect_done, team_page, team_view
from playground.teams.views.retention import retention_context

UPSTREAM = "upstream"  # the value of `form` that the upstream redaction form posts


@require_http_methods(["GET", "POST"])
@team_view(write=frozenset({Role.OWNER}))
def data_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    team = membership.team
    status = 200
    form: forms.Form = TeamStoreForm(initial={"store_mode": team.store_mode})
    upstream: forms.Form = UpstreamRedactionForm(initial={"upstream_redaction": team.upstream_redaction})
    if request.method == "POST" and request.POST.get("form") == UPSTREAM:
        upstream = UpstreamRedactionForm(request.POST)
        if upstream.is_valid():
            on = bool(upstream.cleaned_data["upstream_redaction"])
            team_upstream_redaction_update(actor=membership, on=on)
            text = (
                "The team's requests now go to the model with placeholders for sensitive values."
                if on
                else "The team's requests now go to the model as written."
            )
            return redirect_done(request, text, "teams:data", team.pk)
        status = 400
    elif request.method == "POST":
        form = TeamStoreForm(request.POST)
        if form.is_valid():
            try:
                team_store_mode_update(actor=membership, mode=form.cleaned_data["store_mode"])
            except ValidationError as exc:
                form_errors_add(form, exc)
            else:
                text = f"Records of the team's requests now keep: {team.get_store_mode_display().lower()}."
                return redirect_done(request, text, "teams:data", team.pk)
        status = 400
    context = {"form": form, "upstream": upstream, "keys": api_keys_unrevoked(team=team)}
    context = {**context, **retention_context(team)}
    return team_page(request, membership, "teams/data.html", context, status=status)
