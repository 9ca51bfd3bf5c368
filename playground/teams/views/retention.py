"""Setting the team's retention from its Data page (issue 37): owners only (anyone else 403,
another team 404); a value out of range is shown on its own page with the form as typed."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.views.decorators.http import require_POST

from playground.accounts.models import Membership, Role, Team
from playground.lib.web import HtmxHttpRequest, form_errors_add
from playground.teams.retention_forms import RetentionForm
from playground.teams.retention_selectors import retention_panel
from playground.teams.services.retention import team_retention_update
from playground.teams.views.page import redirect_done, team_page, team_view


@require_POST
@team_view(write=frozenset({Role.OWNER}))
def retention_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    form = RetentionForm(request.POST)
    if form.is_valid():
        body_days, record_days = form.cleaned_data["body_days"], form.cleaned_data["record_days"]
        try:
            team_retention_update(actor=membership, body_days=body_days, record_days=record_days)
        except ValidationError as exc:
            form_errors_add(form, exc)
        else:
            return redirect_done(request, _saved(body_days, record_days), "teams:data", membership.team_id)
    context = {"retention": retention_panel(team=membership.team), "retention_form": form}
    return team_page(request, membership, "teams/data_retention.html", context, status=400)


def retention_context(team: Team) -> dict[str, object]:
    """The Data page's retention panel: the state and the form filled with the team's days."""
    panel = retention_panel(team=team)
    form = RetentionForm(initial={"body_days": panel.body_days, "record_days": panel.record_days})
    return {"retention": panel, "retention_form": form}


def _saved(body_days: int | None, record_days: int | None) -> str:
    texts = f"texts are removed after {body_days} days" if body_days else "texts are kept"
    records = f"records are deleted after {record_days} days" if record_days else "records are kept for good"
    return f"Retention saved: {texts}, {records}."
