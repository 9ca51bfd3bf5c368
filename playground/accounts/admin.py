from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.options import InlineModelAdmin
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from playground.accounts.admin_scope import TeamScopedAdmin, managed_teams
from playground.accounts.models import Membership, Team
from playground.accounts.selectors import team_list_owned


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1


@admin.register(Team)
class TeamAdmin(TeamScopedAdmin):
    list_display = ["name", "slug", "created_at"]
    fields = ["name", "slug"]  # the time zone is set with the budget, on the team's budgets page
    prepopulated_fields = {"slug": ["name"]}
    search_fields = ["name"]

    def get_inlines(self, request: HttpRequest, obj: Team | None) -> list[type[InlineModelAdmin[Any, Any]]]:
        # Picking a user lists every account, so only superusers manage memberships here.
        return [MembershipInline] if request.user.is_superuser else []

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        return managed_teams(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        """Team admins see their team here; only its owners (and superusers) rename it."""
        if not super().has_change_permission(request, obj):
            return False
        if request.user.is_superuser:
            return True
        owned = team_list_owned(user=request.user)
        return owned.filter(pk=obj.pk).exists() if obj is not None else owned.exists()

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # Deleting a team cascades to its conversations, connections and members: not a
        # click in a list, for anyone.
        return False
