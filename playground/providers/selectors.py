"""Reads of provider connections, scoped to the acting user's teams."""

from __future__ import annotations

from django.db.models import QuerySet

from playground.accounts.selectors import AnyUser
from playground.providers.models import ProviderConnection


def connection_list(*, user: AnyUser) -> QuerySet[ProviderConnection]:
    if not user.is_authenticated:
        return ProviderConnection.objects.none()
    return ProviderConnection.objects.filter(team__memberships__user_id=user.pk).select_related("team")


def connection_get(*, user: AnyUser, connection_id: int) -> ProviderConnection | None:
    return connection_list(user=user).filter(pk=connection_id).first()
