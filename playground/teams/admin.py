"""Teams in the (superuser-only) admin. Owners and admins manage theirs on the team pages.

The `Team` model is `accounts`'; its admin is here because adding a team also connects the
embedded engine (`providers`), a floor `accounts` does not import.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from playground.accounts.models import Membership, Team
from playground.providers.services import connection_engine_ensure


class MembershipInline(admin.TabularInline[Membership, Team]):
    model = Membership
    extra = 1


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin[Team]):
    list_display = ["name", "slug", "created_at"]
    fields = ["name", "slug"]  # the time zone is set with the budget, on the team's budgets page
    prepopulated_fields = {"slug": ["name"]}
    search_fields = ["name"]
    inlines = [MembershipInline]

    def save_model(self, request: HttpRequest, obj: Team, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if not change:  # as team_create does: every team has the embedded engine
            connection_engine_ensure(team=obj)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # Deleting a team cascades to its conversations, connections and members: not a
        # click in a list, for anyone.
        return False
