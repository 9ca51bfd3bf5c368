"""Django admin that a team's owners and admins may use for their own teams only.

Superusers see everything; any other staff user sees and edits only objects of the teams
they manage (owner or admin role), and can only pick those teams in forms.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from playground.accounts.models import ROLES_THAT_CAN_MANAGE, Team


def managed_teams(request: HttpRequest) -> QuerySet[Team]:
    user = request.user
    if user.is_superuser:
        return Team.objects.all()
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user, memberships__role__in=ROLES_THAT_CAN_MANAGE)


class TeamScopedAdmin(admin.ModelAdmin):
    team_field = "team"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(**{f"{self.team_field}__in": managed_teams(request)})

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == self.team_field:
            kwargs["queryset"] = managed_teams(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def _manages_any_team(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_staff and managed_teams(request).exists()

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._manages_any_team(request)

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._manages_any_team(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._manages_any_team(request)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._manages_any_team(request)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._manages_any_team(request)
