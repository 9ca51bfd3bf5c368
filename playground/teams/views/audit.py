"""The audit log page: who changed what in the team."""

from __future__ import annotations

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from playground.accounts.models import Membership
from playground.lib.web import HtmxHttpRequest
from playground.teams import selectors
from playground.teams.views.page import team_page, team_view


@require_GET
@team_view()
def audit_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    team = membership.team
    context = {
        "events": selectors.audit_rows(team=team),
        "chain": selectors.decision_chain_status(team=team),
        "seals": selectors.routing_seal_head(team=team),
    }
    return team_page(request, membership, "teams/audit.html", context)
