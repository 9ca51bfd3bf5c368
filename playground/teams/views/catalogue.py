"""The catalogue page: the models and their price cards, a team's overrides, and superusers' global cards."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from playground.accounts.models import Membership
from playground.catalog.selectors import price_cards_visible
from playground.lib.web import HtmxHttpRequest, form_errors_add
from playground.teams import selectors
from playground.teams.forms import GlobalCardForm, OverrideForm
from playground.teams.services.prices import (
    price_card_global_create,
    price_override_create,
    price_override_delete,
)
from playground.teams.views.page import ALL_ROLES, redirect_done, redirect_failed, team_page, team_view


@require_GET
@team_view()
def catalogue_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    return _catalogue_page(request, membership)


def _catalogue_page(
    request: HtmxHttpRequest,
    membership: Membership,
    *,
    override_form: OverrideForm | None = None,
    card_form: GlobalCardForm | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "models": selectors.catalogue_rows(team_id=membership.team_id, today=timezone.now().date()),
        "cards": price_cards_visible(team_id=membership.team_id),
        "override_form": override_form or OverrideForm(initial={"effective_from": timezone.now().date()}),
        "card_form": card_form or GlobalCardForm(initial={"effective_from": timezone.now().date()}),
        "is_superuser": request.user.is_superuser,
    }
    return team_page(request, membership, "teams/catalogue.html", context, status=status)


@require_POST
@team_view()
def override_create_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    form = OverrideForm(request.POST)
    if form.is_valid():
        try:
            price_override_create(actor=membership, **form.cleaned_data)
        except ValidationError as exc:
            form_errors_add(form, exc)
        else:
            return redirect_done(request, "Price override added.", "teams:catalogue", membership.team_id)
    return _catalogue_page(request, membership, override_form=form, status=400)


@require_POST
@team_view()
def override_delete_view(request: HtmxHttpRequest, membership: Membership, card_id: int) -> HttpResponse:
    try:
        price_override_delete(actor=membership, card_id=card_id)
    except ValidationError as exc:
        return redirect_failed(request, exc, "teams:catalogue", membership.team_id)
    return redirect_done(request, "Price override removed.", "teams:catalogue", membership.team_id)


@require_POST
@team_view(write=ALL_ROLES)  # superusers only: the service refuses everyone else
def global_card_create_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    if not request.user.is_superuser:
        raise PermissionDenied("Only a superuser can add a global price card.")
    form = GlobalCardForm(request.POST)
    if form.is_valid():
        try:
            price_card_global_create(user=request.user, team=membership.team, **form.cleaned_data)
        except ValidationError as exc:
            form_errors_add(form, exc)
        else:
            return redirect_done(request, "Global price card added.", "teams:catalogue", membership.team_id)
    return _catalogue_page(request, membership, card_form=form, status=400)
