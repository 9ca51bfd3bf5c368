"""The members page: roles, removal, ownership, leaving, and the invitations made from it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from playground.accounts.models import Membership, Role
from playground.accounts.selectors import team_list_for_user
from playground.lib.web import HtmxHttpRequest
from playground.teams import selectors
from playground.teams.forms import InvitationForm, RoleForm
from playground.teams.services.invitations import invitation_create, invitation_revoke
from playground.teams.services.members import (
    member_leave,
    member_remove,
    member_role_change,
    ownership_transfer,
)
from playground.teams.views.page import ALL_ROLES, redirect_done, redirect_failed, team_page, team_view


@login_required
@require_GET
def team_home_view(request: HtmxHttpRequest) -> HttpResponse:
    team = team_list_for_user(user=request.user).first()
    if team is None:
        return render(request, "teams/no_team.html")
    return redirect("teams:members", team_id=team.pk)


@require_GET
@team_view()
def members_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    return _members_page(request, membership)


def _members_page(
    request: HtmxHttpRequest,
    membership: Membership,
    *,
    invite_form: InvitationForm | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "members": selectors.member_rows(team=membership.team),
        "invitations": selectors.invitations_pending(team=membership.team),
        "invite_form": invite_form or InvitationForm(can_invite_owner=membership.role == Role.OWNER),
        "invitation_link": _invitation_link_pop(request, membership.team_id),
        "roles": Role.choices,
    }
    return team_page(request, membership, "teams/members.html", context, status=status)


# The link of an invitation just made waits in the session for the page the POST redirects
# to, which shows it once and drops it: a reload makes no second invitation and shows no link.
INVITATION_LINK_KEY = "teams:invitation-link"


def _invitation_link_pop(request: HttpRequest, team_id: int) -> str:
    kept = request.session.get(INVITATION_LINK_KEY)
    if not isinstance(kept, dict) or kept.get("team_id") != team_id:
        return ""
    del request.session[INVITATION_LINK_KEY]
    return str(kept.get("link", ""))


@require_POST
@team_view()
def invitation_create_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    form = InvitationForm(request.POST, can_invite_owner=membership.role == Role.OWNER)
    if not form.is_valid():
        return _members_page(request, membership, invite_form=form, status=400)
    try:
        _invitation, token = invitation_create(actor=membership, **form.cleaned_data)
    except (ValidationError, PermissionDenied) as exc:
        return redirect_failed(request, exc, "teams:members", membership.team_id)
    link = request.build_absolute_uri(reverse("teams:join", kwargs={"token": token}))
    request.session[INVITATION_LINK_KEY] = {"team_id": membership.team_id, "link": link}
    return redirect("teams:members", team_id=membership.team_id)


@require_POST
@team_view()
def invitation_revoke_view(
    request: HtmxHttpRequest, membership: Membership, invitation_id: int
) -> HttpResponse:
    try:
        invitation_revoke(actor=membership, invitation_id=invitation_id)
    except ValidationError as exc:
        return redirect_failed(request, exc, "teams:members", membership.team_id)
    return redirect_done(request, "Invitation revoked.", "teams:members", membership.team_id)


@require_POST
@team_view()
def member_role_view(request: HtmxHttpRequest, membership: Membership, membership_id: int) -> HttpResponse:
    form = RoleForm(request.POST)
    if not form.is_valid():
        return redirect_failed(
            request, ValidationError("Choose a role."), "teams:members", membership.team_id
        )
    try:
        target = member_role_change(
            actor=membership, membership_id=membership_id, role=form.cleaned_data["role"]
        )
    except (ValidationError, PermissionDenied) as exc:
        return redirect_failed(request, exc, "teams:members", membership.team_id)
    return redirect_done(
        request,
        f"{target.user.get_username()} is now {target.get_role_display().lower()}.",
        "teams:members",
        membership.team_id,
    )


@require_POST
@team_view()
def member_remove_view(request: HtmxHttpRequest, membership: Membership, membership_id: int) -> HttpResponse:
    try:
        member_remove(actor=membership, membership_id=membership_id)
    except (ValidationError, PermissionDenied) as exc:
        return redirect_failed(request, exc, "teams:members", membership.team_id)
    return redirect_done(request, "Member removed.", "teams:members", membership.team_id)


@require_POST
@team_view(write=frozenset({Role.OWNER}))
def ownership_transfer_view(
    request: HtmxHttpRequest, membership: Membership, membership_id: int
) -> HttpResponse:
    try:
        target = ownership_transfer(actor=membership, membership_id=membership_id)
    except (ValidationError, PermissionDenied) as exc:
        return redirect_failed(request, exc, "teams:members", membership.team_id)
    return redirect_done(
        request,
        f"{target.user.get_username()} now owns the team; you are an admin.",
        "teams:members",
        membership.team_id,
    )


@require_POST
@team_view(write=ALL_ROLES)
def team_leave_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    try:
        member_leave(membership=membership)
    except ValidationError as exc:
        return redirect_failed(request, exc, "teams:members", membership.team_id)
    messages.success(request, f"You left {membership.team.name}.")
    return redirect("teams:home")
