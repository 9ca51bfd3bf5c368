"""Reads about teams. Every other selector scopes its queries through these."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

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


async def amembership_get(*, user: AnyUser, team_id: int) -> Membership | None:
    if not user.is_authenticated:
        return None
    return await Membership.objects.filter(user_id=user.pk, team_id=team_id).select_related("team").afirst()
