"""The team's Data page: what the records of its requests keep of their text (issue 37)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.views.decorators.http import require_http_methods

from playground.accounts.models import Membership, Role
from playground.lib.web import HtmxHttpRequest, form_errors_add
from playground.teams.api_key_selectors import api_keys_unrevoked
from playground.teams.forms import TeamStoreForm
from playground.teams.services.storage import team_store_mode_update
from playground.teams.views.page import redirect_done, team_page, team_view
from playground.teams.views.retention import retention_context


@require_http_methods(["GET", "POST"])
@team_view(write=frozenset({Role.OWNER}))
def data_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    team = membership.team
    status = 200
    if request.method == "POST":
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
    else:
        form = TeamStoreForm(initial={"store_mode": team.store_mode})
    context = {"form": form, "keys": api_keys_unrevoked(team=team)}
    context = {**context, **retention_context(team)}
    return team_page(request, membership, "teams/data.html", context, status=status)
