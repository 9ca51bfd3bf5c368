"""Invitation links, open to visitors without an account: join, sign up from one, or sign in knowing one."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login, user_login_failed
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from playground.accounts.lockout import lockout_response
from playground.accounts.models import Invitation, Membership
from playground.lib.web import form_errors_add
from playground.teams.forms import SignupForm
from playground.teams.services.invitations import (
    invitation_accept,
    invitation_for_token,
    invitation_problem,
    invitation_signup,
)
from playground.teams.sso.discovery import sso_enabled
from playground.teams.sso.forms import LoginForm


@login_not_required
@never_cache
@require_http_methods(["GET", "POST"])
def join_view(request: HttpRequest, token: str) -> HttpResponse:
    """An invitation link; it works once, before it expires.

    A signed-in user joins with a button (POST); a visitor sees who invites them to which
    team, a sign-up form (posted to `join_signup_view`) and a way to sign in instead.
    """
    invitation = invitation_for_token(token=token)
    problem = invitation_problem(invitation)
    if request.method == "POST" and not problem:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        try:
            joined = invitation_accept(user=request.user, token=token)
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
    invitation = invitation_for_token(token=token)
    if problem := invitation_problem(invitation):
        user_login_failed.send(sender=__name__, credentials={"username": username}, request=request)
        return _join_page(request, token, invitation, problem=problem)
    form = SignupForm(request.POST)
    if form.is_valid():
        try:
            joined = invitation_signup(token=token, user=form.save(commit=False))
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
    """The site login; reached from an invitation link, it names the team the visitor is joining.
    With single sign-on configured it offers "Sign in with <provider>" beside the password form."""

    authentication_form = LoginForm

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["invitation"] = _invitation_of(context.get(self.redirect_field_name, ""))
        context["sso_name"] = settings.OIDC_PROVIDER_NAME if sso_enabled() else ""
        return context


def _invitation_of(next_url: str) -> Invitation | None:
    """The usable invitation whose link `next_url` is, or None."""
    try:
        match = resolve(urlsplit(next_url).path)
    except Resolver404:
        return None
    if match.view_name != "teams:join":
        return None
    invitation = invitation_for_token(token=match.kwargs["token"])
    return None if invitation_problem(invitation) else invitation
