"""Team pages: members, connections, catalogue and price cards, budgets, audit log.

Thin views over `teams.services` (writes) and `teams.selectors` (reads). Every page is
`/teams/<team_id>/…`: `team_view` finds the user's membership of that team (none: 404, so
another team's pages and objects do not exist for you) and checks the role the method
needs: every member reads, owners and admins change things. Services check the finer rules
(admins never touch owners; the last owner stays).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlsplit

from axes.handlers.proxy import AxesProxyHandler
from django.contrib import messages
from django.contrib.auth import login, user_login_failed
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required, login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve, reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from playground.accounts.lockout import lockout_response
from playground.accounts.models import ROLES_THAT_CAN_MANAGE, Invitation, Membership, Role
from playground.accounts.selectors import team_list_for_user
from playground.catalog.selectors import price_cards_visible
from playground.lib.web import HtmxHttpRequest, form_errors_add
from playground.providers.kinds import kind_spec
from playground.providers.models import ProviderConnection
from playground.teams import selectors
from playground.teams.forms import (
    ConnectionForm,
    GlobalCardForm,
    InvitationForm,
    KindForm,
    MemberBudgetForm,
    OverrideForm,
    RoleForm,
    SignupForm,
    TeamBudgetForm,
    UnpricedForm,
)
from playground.teams.services import members as services
from playground.usage.budgets import budget_status

ALL_ROLES = frozenset(Role.values)
TeamView = Callable[..., HttpResponse]


def team_view(
    *, read: frozenset[str] = ALL_ROLES, write: frozenset[str] = ROLES_THAT_CAN_MANAGE
) -> Callable[[TeamView], TeamView]:
    """Resolve `team_id` to the user's membership (404 when none); GET needs `read`, POST `write`."""

    def decorate(view: TeamView) -> TeamView:
        @wraps(view)
        @never_cache
        @login_required
        def wrapper(request: HtmxHttpRequest, team_id: int, **kwargs: Any) -> HttpResponse:
            membership = selectors.membership_for(user=request.user, team_id=team_id)
            if membership is None:
                raise Http404("No such team.")
            allowed = write if request.method == "POST" else read
            if membership.role not in allowed:
                raise PermissionDenied("Your role in this team does not allow that.")
            return view(request, membership, **kwargs)

        return wrapper

    return decorate


def _page(
    request: HttpRequest, membership: Membership, template: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    base = {
        "team": membership.team,
        "membership": membership,
        "can_manage": membership.role in ROLES_THAT_CAN_MANAGE,
        "is_owner": membership.role == Role.OWNER,
    }
    return render(request, template, {**base, **context}, status=status)


def _done(request: HttpRequest, text: str, to: str, team_id: int) -> HttpResponse:
    messages.success(request, text)
    return redirect(to, team_id=team_id)


def _failed(
    request: HttpRequest, exc: ValidationError | PermissionDenied, to: str, team_id: int
) -> HttpResponse:
    text = " ".join(exc.messages) if isinstance(exc, ValidationError) else (str(exc) or "Not allowed.")
    messages.error(request, text)
    return redirect(to, team_id=team_id)


@login_required
@require_GET
def team_home_view(request: HtmxHttpRequest) -> HttpResponse:
    team = team_list_for_user(user=request.user).first()
    if team is None:
        return render(request, "teams/no_team.html")
    return redirect("teams:members", team_id=team.pk)


# --- members -----------------------------------------------------------------------------------------


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
    return _page(request, membership, "teams/members.html", context, status=status)


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
        _invitation, token = services.invitation_create(actor=membership, **form.cleaned_data)
    except (ValidationError, PermissionDenied) as exc:
        return _failed(request, exc, "teams:members", membership.team_id)
    link = request.build_absolute_uri(reverse("teams:join", kwargs={"token": token}))
    request.session[INVITATION_LINK_KEY] = {"team_id": membership.team_id, "link": link}
    return redirect("teams:members", team_id=membership.team_id)


@require_POST
@team_view()
def invitation_revoke_view(
    request: HtmxHttpRequest, membership: Membership, invitation_id: int
) -> HttpResponse:
    try:
        services.invitation_revoke(actor=membership, invitation_id=invitation_id)
    except ValidationError as exc:
        return _failed(request, exc, "teams:members", membership.team_id)
    return _done(request, "Invitation revoked.", "teams:members", membership.team_id)


@require_POST
@team_view()
def member_role_view(request: HtmxHttpRequest, membership: Membership, membership_id: int) -> HttpResponse:
    form = RoleForm(request.POST)
    if not form.is_valid():
        return _failed(request, ValidationError("Choose a role."), "teams:members", membership.team_id)
    try:
        target = services.member_role_change(
            actor=membership, membership_id=membership_id, role=form.cleaned_data["role"]
        )
    except (ValidationError, PermissionDenied) as exc:
        return _failed(request, exc, "teams:members", membership.team_id)
    return _done(
        request,
        f"{target.user.get_username()} is now {target.get_role_display().lower()}.",
        "teams:members",
        membership.team_id,
    )


@require_POST
@team_view()
def member_remove_view(request: HtmxHttpRequest, membership: Membership, membership_id: int) -> HttpResponse:
    try:
        services.member_remove(actor=membership, membership_id=membership_id)
    except (ValidationError, PermissionDenied) as exc:
        return _failed(request, exc, "teams:members", membership.team_id)
    return _done(request, "Member removed.", "teams:members", membership.team_id)


@require_POST
@team_view(write=frozenset({Role.OWNER}))
def ownership_transfer_view(
    request: HtmxHttpRequest, membership: Membership, membership_id: int
) -> HttpResponse:
    try:
        target = services.ownership_transfer(actor=membership, membership_id=membership_id)
    except (ValidationError, PermissionDenied) as exc:
        return _failed(request, exc, "teams:members", membership.team_id)
    return _done(
        request,
        f"{target.user.get_username()} now owns the team; you are an admin.",
        "teams:members",
        membership.team_id,
    )


@require_POST
@team_view(write=ALL_ROLES)
def team_leave_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    try:
        services.member_leave(membership=membership)
    except ValidationError as exc:
        return _failed(request, exc, "teams:members", membership.team_id)
    messages.success(request, f"You left {membership.team.name}.")
    return redirect("teams:home")


# --- invitation links: open to visitors without an account ---------------------------------------------


@login_not_required
@never_cache
@require_http_methods(["GET", "POST"])
def join_view(request: HttpRequest, token: str) -> HttpResponse:
    """An invitation link; it works once, before it expires.

    A signed-in user joins with a button (POST); a visitor sees who invites them to which
    team, a sign-up form (posted to `join_signup_view`) and a way to sign in instead.
    """
    invitation = services.invitation_for_token(token=token)
    problem = services.invitation_problem(invitation)
    if request.method == "POST" and not problem:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        try:
            joined = services.invitation_accept(user=request.user, token=token)
        except ValidationError as exc:
            problem = " ".join(exc.messages)
        else:
            return _welcome(request, joined)
    form = None
    if invitation is not None and not problem and not request.user.is_authenticated:
        form = SignupForm(initial={"email": invitation.email})
    return _join_page(request, token, invitation, problem=problem, form=form)


@login_not_required
@never_cache
@require_POST
def join_signup_view(request: HttpRequest, token: str) -> HttpResponse:
    """Create an account from an invitation link and join with it.

    The login limits cover this form: a client address locked out of logins cannot sign up
    either, and a post with a link that is not valid counts as a failed login (someone
    guessing links).
    """
    if request.user.is_authenticated:
        return redirect("teams:join", token=token)
    username = str(request.POST.get("username", ""))[:150]
    if AxesProxyHandler.is_locked(request, credentials={"username": username}):
        return lockout_response(request)
    invitation = services.invitation_for_token(token=token)
    if problem := services.invitation_problem(invitation):
        user_login_failed.send(sender=__name__, credentials={"username": username}, request=request)
        return _join_page(request, token, invitation, problem=problem)
    form = SignupForm(request.POST)
    if form.is_valid():
        try:
            joined = services.invitation_signup(token=token, user=form.save(commit=False))
        except ValidationError as exc:
            if not hasattr(exc, "error_dict"):
                return _join_page(request, token, invitation, problem=" ".join(exc.messages))
            form_errors_add(form, exc)
        else:
            login(request, joined.user, backend="django.contrib.auth.backends.ModelBackend")
            return _welcome(request, joined)
    return _join_page(request, token, invitation, form=form, status=400)


def _welcome(request: HttpRequest, joined: Membership) -> HttpResponse:
    messages.success(request, f"Welcome to {joined.team.name}.")
    return redirect("teams:members", team_id=joined.team_id)


def _join_page(
    request: HttpRequest,
    token: str,
    invitation: Invitation | None,
    *,
    problem: str = "",
    form: SignupForm | None = None,
    status: int | None = None,
) -> HttpResponse:
    context = {
        "invitation": invitation,
        "problem": problem,
        "form": form,
        "token": token,
    }
    return render(request, "teams/join.html", context, status=status or (400 if problem else 200))


class LoginView(auth_views.LoginView):
    """The site login; reached from an invitation link, it names the team the visitor is joining."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["invitation"] = _invitation_of(context.get(self.redirect_field_name, ""))
        return context


def _invitation_of(next_url: str) -> Invitation | None:
    """The usable invitation whose link `next_url` is, or None."""
    try:
        match = resolve(urlsplit(next_url).path)
    except Resolver404:
        return None
    if match.view_name != "teams:join":
        return None
    invitation = services.invitation_for_token(token=match.kwargs["token"])
    return None if services.invitation_problem(invitation) else invitation


# --- connections -------------------------------------------------------------------------------------


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
    return _page(request, membership, "teams/connections.html", context)


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
        services.connection_write(
            actor=membership,
            connection=connection,
            token=form.token_change() if "token" in form.fields else None,
            previous_base_url=previous_base_url,
        )
    except ValidationError as exc:
        form_errors_add(form, exc)
        return _connection_form_page(request, membership, form, kind=connection.kind, status=400)
    return _done(request, f"Saved {connection.name}.", "teams:connections", membership.team_id)


def _connection_form_page(
    request: HtmxHttpRequest, membership: Membership, form: ConnectionForm, *, kind: str, status: int
) -> HttpResponse:
    context = {"form": form, "kind": kind, "spec": kind_spec(kind), "connection": form.instance}
    return _page(request, membership, "teams/connection_form.html", context, status=status)


@require_POST
@team_view()
def connection_delete_view(
    request: HtmxHttpRequest, membership: Membership, connection_id: int
) -> HttpResponse:
    connection = _connection(membership, connection_id)
    try:
        services.connection_delete(actor=membership, connection=connection)
    except ValidationError as exc:
        return _failed(request, exc, "teams:connections", membership.team_id)
    return _done(request, f"Deleted {connection.name}.", "teams:connections", membership.team_id)


@require_POST
@team_view()
def connection_test_view(
    request: HtmxHttpRequest, membership: Membership, connection_id: int
) -> HttpResponse:
    """List the provider's models through the HTTP seam: latency, or the redacted error."""
    connection = _connection(membership, connection_id)
    result = services.connection_test(actor=membership, connection=connection)
    return _connections_page(request, membership, tested=connection.pk, result=result)


# --- catalogue and price cards --------------------------------------------------------------------------


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
    return _page(request, membership, "teams/catalogue.html", context, status=status)


@require_POST
@team_view()
def override_create_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    form = OverrideForm(request.POST)
    if form.is_valid():
        try:
            services.price_override_create(actor=membership, **form.cleaned_data)
        except ValidationError as exc:
            form_errors_add(form, exc)
        else:
            return _done(request, "Price override added.", "teams:catalogue", membership.team_id)
    return _catalogue_page(request, membership, override_form=form, status=400)


@require_POST
@team_view()
def override_delete_view(request: HtmxHttpRequest, membership: Membership, card_id: int) -> HttpResponse:
    try:
        services.price_override_delete(actor=membership, card_id=card_id)
    except ValidationError as exc:
        return _failed(request, exc, "teams:catalogue", membership.team_id)
    return _done(request, "Price override removed.", "teams:catalogue", membership.team_id)


@require_POST
@team_view(write=ALL_ROLES)  # superusers only: the service refuses everyone else
def global_card_create_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    if not request.user.is_superuser:
        raise PermissionDenied("Only a superuser can add a global price card.")
    form = GlobalCardForm(request.POST)
    if form.is_valid():
        try:
            services.price_card_global_create(user=request.user, team=membership.team, **form.cleaned_data)
        except ValidationError as exc:
            form_errors_add(form, exc)
        else:
            return _done(request, "Global price card added.", "teams:catalogue", membership.team_id)
    return _catalogue_page(request, membership, card_form=form, status=400)


# --- budgets -------------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@team_view()
def budgets_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    team = membership.team
    if request.method == "POST":
        form = TeamBudgetForm(request.POST)
        if form.is_valid():
            try:
                services.team_budget_update(actor=membership, **form.cleaned_data)
            except ValidationError as exc:
                form_errors_add(form, exc)
            else:
                return _done(request, "Budget saved.", "teams:budgets", team.pk)
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
    return _page(request, membership, "teams/budgets.html", context, status=status)


@require_POST
@team_view(write=frozenset({Role.OWNER}))
def budget_unpriced_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    form = UnpricedForm(request.POST)
    form.is_valid()  # an unticked box is just "off"
    allow = form.cleaned_data.get("allow_unpriced", False)
    services.team_unpriced_update(actor=membership, allow=allow)
    text = "Unpriced requests are allowed." if allow else "Unpriced requests are refused under a budget."
    return _done(request, text, "teams:budgets", membership.team_id)


@require_POST
@team_view()
def member_budget_view(request: HtmxHttpRequest, membership: Membership, membership_id: int) -> HttpResponse:
    form = MemberBudgetForm(request.POST)
    if not form.is_valid():
        return _failed(
            request,
            ValidationError("Enter a budget in dollars, or leave it blank."),
            "teams:budgets",
            membership.team_id,
        )
    try:
        services.member_budget_update(
            actor=membership,
            membership_id=membership_id,
            monthly_budget_usd=form.cleaned_data["monthly_budget_usd"],
        )
    except ValidationError as exc:
        return _failed(request, exc, "teams:budgets", membership.team_id)
    return _done(request, "Member budget saved.", "teams:budgets", membership.team_id)


# --- audit ---------------------------------------------------------------------------------------------


@require_GET
@team_view()
def audit_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    return _page(
        request, membership, "teams/audit.html", {"events": selectors.audit_rows(team=membership.team)}
    )
