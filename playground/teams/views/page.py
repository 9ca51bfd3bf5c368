"""What every team page shares: membership and role checked, the page rendered, redirects with a message."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache

from playground.accounts.models import ROLES_THAT_CAN_MANAGE, Membership, Role
from playground.lib.web import HtmxHttpRequest
from playground.teams import selectors

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


def team_page(
    request: HttpRequest, membership: Membership, template: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    base = {
        "team": membership.team,
        "membership": membership,
        "can_manage": membership.role in ROLES_THAT_CAN_MANAGE,
        "is_owner": membership.role == Role.OWNER,
    }
    return render(request, template, {**base, **context}, status=status)


def redirect_done(request: HttpRequest, text: str, to: str, team_id: int) -> HttpResponse:
    messages.success(request, text)
    return redirect(to, team_id=team_id)


def redirect_failed(
    request: HttpRequest, exc: ValidationError | PermissionDenied, to: str, team_id: int
) -> HttpResponse:
    text = " ".join(exc.messages) if isinstance(exc, ValidationError) else (str(exc) or "Not allowed.")
    messages.error(request, text)
    return redirect(to, team_id=team_id)
