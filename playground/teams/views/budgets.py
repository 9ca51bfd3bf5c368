"""The budgets page: the team's monthly limit and alerts, unpriced requests, and members' limits."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.views.decorators.http import require_http_methods, require_POST

from playground.accounts.models import Membership, Role
from playground.lib.web import HtmxHttpRequest, form_errors_add
from playground.teams import selectors
from playground.teams.forms import MemberBudgetForm, TeamBudgetForm, UnpricedForm
from playground.teams.services.budgets import member_budget_update, team_budget_update, team_unpriced_update
from playground.teams.views.page import redirect_done, redirect_failed, team_page, team_view
from playground.usage.budgets import budget_status


@require_http_methods(["GET", "POST"])
@team_view()
def budgets_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    team = membership.team
    if request.method == "POST":
        form = TeamBudgetForm(request.POST)
        if form.is_valid():
            try:
                team_budget_update(actor=membership, **form.cleaned_data)
            except ValidationError as exc:
                form_errors_add(form, exc)
            else:
                return redirect_done(request, "Budget saved.", "teams:budgets", team.pk)
        status = 400
    else:
        form = TeamBudgetForm(initial=selectors.team_budget_settings(team=team))
        status = 200
    figures = budget_status(team=team)
    context = {
        "form": form,
        "allow_unpriced": bool(getattr(team, "budget", None) and team.budget.allow_unpriced),
        "status": selectors.budget_view(figures),
        "member_rows": selectors.member_budget_rows(team=team, month=figures.month),
    }
    return team_page(request, membership, "teams/budgets.html", context, status=status)


@require_POST
@team_view(write=frozenset({Role.OWNER}))
def budget_unpriced_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    form = UnpricedForm(request.POST)
    form.is_valid()  # an unticked box is just "off"
    allow = form.cleaned_data.get("allow_unpriced", False)
    team_unpriced_update(actor=membership, allow=allow)
    text = "Unpriced requests are allowed." if allow else "Unpriced requests are refused under a budget."
    return redirect_done(request, text, "teams:budgets", membership.team_id)


@require_POST
@team_view()
def member_budget_view(request: HtmxHttpRequest, membership: Membership, membership_id: int) -> HttpResponse:
    form = MemberBudgetForm(request.POST)
    if not form.is_valid():
        return redirect_failed(
            request,
            ValidationError("Enter a budget in dollars, or leave it blank."),
            "teams:budgets",
            membership.team_id,
        )
    try:
        member_budget_update(
            actor=membership,
            membership_id=membership_id,
            monthly_budget_usd=form.cleaned_data["monthly_budget_usd"],
        )
    except ValidationError as exc:
        return redirect_failed(request, exc, "teams:budgets", membership.team_id)
    return redirect_done(request, "Member budget saved.", "teams:budgets", membership.team_id)
