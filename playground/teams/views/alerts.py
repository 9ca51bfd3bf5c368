"""Team → Alerts: where the team's alerts go (Slack, Microsoft Teams, signed webhooks), the rules
that raise them, a test button per destination, and the delivery log (issue 41)."""

from __future__ import annotations

import uuid

from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.views.decorators.http import require_http_methods, require_POST

from playground.accounts.models import Membership
from playground.alerts.destinations import destination_create, destination_delete, rules_update
from playground.alerts.events import alert_test
from playground.alerts.selectors import team_deliveries, team_destination, team_destinations, team_rules
from playground.lib.web import HtmxHttpRequest, form_errors_add
from playground.teams.alert_forms import AlertRulesForm, DestinationForm
from playground.teams.views.page import redirect_done, team_page, team_view

RULES = "rules"  # the value of `form` that the rules form posts


@require_http_methods(["GET", "POST"])
@team_view()
def alerts_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    team = membership.team
    rules = team_rules(team_id=team.pk)
    destination_form = DestinationForm()
    rules_form = AlertRulesForm(
        initial={
            "connection_errors": rules.connection_errors,
            "connection_minutes": rules.connection_minutes,
            "spend_factor": rules.spend_factor,
            "cache_drop_points": rules.cache_drop_points,
        }
    )
    status = 200
    if request.method == "POST" and request.POST.get("form") == RULES:
        rules_form = AlertRulesForm(request.POST)
        if rules_form.is_valid():
            rules_update(actor=membership, **rules_form.cleaned_data)
            return redirect_done(request, "Alert rules saved.", "teams:alerts", team.pk)
        status = 400
    elif request.method == "POST":
        destination_form = DestinationForm(request.POST)
        if destination_form.is_valid():
            try:
                created = destination_create(actor=membership, **destination_form.cleaned_data)
            except ValidationError as exc:
                form_errors_add(destination_form, exc)
            else:
                text = f"Alerts now go to {created.name}. Send it a test to check it arrives."
                return redirect_done(request, text, "teams:alerts", team.pk)
        status = 400
    context = {
        "destinations": team_destinations(team_id=team.pk),
        "deliveries": team_deliveries(team_id=team.pk),
        "rules": rules,
        "destination_form": destination_form,
        "rules_form": rules_form,
    }
    return team_page(request, membership, "teams/alerts.html", context, status=status)


@require_POST
@team_view()
def alert_test_view(request: HtmxHttpRequest, membership: Membership, destination_id: int) -> HttpResponse:
    destination = team_destination(team_id=membership.team_id, destination_id=destination_id)
    if destination is None:
        raise Http404("No such destination.")
    alert_test(destination=destination, key=uuid.uuid4().hex)
    text = f"A test alert is on its way to {destination.name}: its delivery shows below in a moment."
    return redirect_done(request, text, "teams:alerts", membership.team_id)


@require_POST
@team_view()
def alert_destination_delete_view(
    request: HtmxHttpRequest, membership: Membership, destination_id: int
) -> HttpResponse:
    if not destination_delete(actor=membership, destination_id=destination_id):
        raise Http404("No such destination.")
    return redirect_done(
        request, "Destination removed; its delivery log went with it.", "teams:alerts", membership.team_id
    )
