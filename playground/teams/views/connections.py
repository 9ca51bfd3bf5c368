"""The connections pages: list, create, edit, delete and test a team's provider connections."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from playground.accounts.models import ROLES_THAT_CAN_MANAGE, Membership
from playground.lib.web import HtmxHttpRequest, form_errors_add
from playground.providers.kinds import kind_spec
from playground.providers.models import ProviderConnection
from playground.teams import selectors
from playground.teams.forms import ConnectionForm, KindForm
from playground.teams.services.connections import connection_delete, connection_test, connection_write
from playground.teams.views.page import redirect_done, redirect_failed, team_page, team_view


def _connection(membership: Membership, connection_id: int) -> ProviderConnection:
    connection = selectors.connection_for(team_id=membership.team_id, connection_id=connection_id)
    if connection is None:
        raise Http404("No such connection.")
    return connection


@require_GET
@team_view()
def connections_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    return _connections_page(request, membership)


def _connections_page(request: HtmxHttpRequest, membership: Membership, **extra: Any) -> HttpResponse:
    context = {
        "connections": selectors.connection_list(team_id=membership.team_id),
        "kind_form": KindForm(),
        **extra,
    }
    return team_page(request, membership, "teams/connections.html", context)


@require_http_methods(["GET", "POST"])
@team_view(read=ROLES_THAT_CAN_MANAGE)
def connection_create_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    kind = request.POST.get("kind") or request.GET.get("kind") or ""
    if kind not in dict(KindForm.base_fields["kind"].choices):  # type: ignore[attr-defined]
        messages.error(request, "Choose the kind of connection to add.")
        return redirect("teams:connections", team_id=membership.team_id)
    instance = ProviderConnection(team=membership.team, kind=kind)
    if request.method == "POST" and "name" in request.POST:
        form = ConnectionForm(request.POST, instance=instance, kind=kind)
        if form.is_valid():
            return _connection_save(request, membership, form, previous_base_url=None)
        status = 400
    else:
        form, status = (
            ConnectionForm(instance=instance, kind=kind, initial={"name": kind_spec(kind).label}),
            200,
        )
    return _connection_form_page(request, membership, form, kind=kind, status=status)


@require_http_methods(["GET", "POST"])
@team_view(read=ROLES_THAT_CAN_MANAGE)
def connection_edit_view(
    request: HtmxHttpRequest, membership: Membership, connection_id: int
) -> HttpResponse:
    connection = _connection(membership, connection_id)
    previous_base_url = connection.base_url
    if request.method == "POST":
        form = ConnectionForm(request.POST, instance=connection, kind=connection.kind)
        if form.is_valid():
            return _connection_save(request, membership, form, previous_base_url=previous_base_url)
        status = 400
    else:
        form, status = ConnectionForm(instance=connection, kind=connection.kind), 200
    return _connection_form_page(request, membership, form, kind=connection.kind, status=status)


def _connection_save(
    request: HtmxHttpRequest, membership: Membership, form: ConnectionForm, *, previous_base_url: str | None
) -> HttpResponse:
    connection = form.save(commit=False)
    try:
        connection_write(
            actor=membership,
            connection=connection,
            token=form.token_change() if "token" in form.fields else None,
            previous_base_url=previous_base_url,
        )
    except ValidationError as exc:
        form_errors_add(form, exc)
        return _connection_form_page(request, membership, form, kind=connection.kind, status=400)
    return redirect_done(request, f"Saved {connection.name}.", "teams:connections", membership.team_id)


def _connection_form_page(
    request: HtmxHttpRequest, membership: Membership, form: ConnectionForm, *, kind: str, status: int
) -> HttpResponse:
    context = {"form": form, "kind": kind, "spec": kind_spec(kind), "connection": form.instance}
    return team_page(request, membership, "teams/connection_form.html", context, status=status)


@require_POST
@team_view()
def connection_delete_view(
    request: HtmxHttpRequest, membership: Membership, connection_id: int
) -> HttpResponse:
    connection = _connection(membership, connection_id)
    try:
        connection_delete(actor=membership, connection=connection)
    except ValidationError as exc:
        return redirect_failed(request, exc, "teams:connections", membership.team_id)
    return redirect_done(request, f"Deleted {connection.name}.", "teams:connections", membership.team_id)


@require_POST
@team_view()
def connection_test_view(
    request: HtmxHttpRequest, membership: Membership, connection_id: int
) -> HttpResponse:
    """List the provider's models through the HTTP seam: latency, or the redacted error."""
    connection = _connection(membership, connection_id)
    result = connection_test(actor=membership, connection=connection)
    return _connections_page(request, membership, tested=connection.pk, result=result)
