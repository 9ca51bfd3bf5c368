"""Reads about teams. Every other selector scopes its queries through these."""

from __future__ import annotations

from importlib import import_module

from django.conf import settings
from django.contrib.auth import aget_user
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet
from django.http import HttpRequest

from playground.accounts.models import Membership, Team

AnyUser = User | AnonymousUser


def team_list_for_user(*, user: AnyUser) -> QuerySet[Team]:
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user_id=user.pk).order_by("name")


def membership_get(*, user: AnyUser, team_id: int) -> Membership | None:
    """The user's membership of `team_id`, or None (also for anonymous users)."""
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(user_id=user.pk, team_id=team_id).select_related("team").first()


async def asession_user_id(*, session_key: str | None) -> int | None:
    """The id of the active user the session `session_key` signs in, or None.

    Reads the session store afresh (a socket's copy was loaded when it connected), so a
    logout, an expired session, a changed password or a deactivated account shows at once.
    """
    if not session_key:
        return None
    request = HttpRequest()
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = await aget_user(request)
    return user.pk if user.is_authenticated else None
