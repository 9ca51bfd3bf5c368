from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.options import InlineModelAdmin
from django.db.models import QuerySet
from django.http import HttpRequest

from playground.accounts.admin_scope import TeamScopedAdmin, managed_teams
from playground.accounts.models import Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1


@admin.register(Team)
class TeamAdmin(TeamScopedAdmin):
    list_display = ["name", "slug", "created_at"]
    prepopulated_fields = {"slug": ["name"]}
    search_fields = ["name"]

    def get_inlines(self, request: HttpRequest, obj: Team | None) -> list[type[InlineModelAdmin[Any, Any]]]:
        # Picking a user lists every account, so only superusers manage memberships here.
        return [MembershipInline] if request.user.is_superuser else []

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        return managed_teams(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser
