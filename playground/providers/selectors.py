"""Reads of provider connections, scoped to the acting user's teams."""

from __future__ import annotations

from django.db.models import QuerySet

from playground.accounts.models import ROLES_THAT_CAN_RUN
from playground.accounts.selectors import AnyUser
from playground.providers.models import ProviderConnection


def connection_list(*, user: AnyUser) -> QuerySet[ProviderConnection]:
    if not user.is_authenticated:
        return ProviderConnection.objects.none()
    return ProviderConnection.objects.filter(team__memberships__user_id=user.pk).select_related("team")


def connection_list_runnable(*, user: AnyUser) -> QuerySet[ProviderConnection]:
    """Connections of the teams where `user` may send requests (not where they are a viewer),
    by team, the default first."""
    if not user.is_authenticated:
        return ProviderConnection.objects.none()
    return (
        ProviderConnection.objects.filter(
            team__memberships__user_id=user.pk, team__memberships__role__in=ROLES_THAT_CAN_RUN
        )
        .select_related("team")
        .order_by("team__name", "-is_default", "name")
    )


def connection_get(*, user: AnyUser, connection_id: int) -> ProviderConnection | None:
    return connection_list(user=user).filter(pk=connection_id).first()
