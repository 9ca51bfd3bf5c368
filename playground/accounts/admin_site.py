"""The Django admin, for superusers only.

Team owners and admins manage their teams on the team pages (`playground/teams/`); the
admin is the superusers' tool for the catalogue, global price cards and teams themselves.
A staff flag alone opens nothing here: anyone else is sent to the admin's login page.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest


class SuperuserAdminSite(admin.AdminSite):
    site_header = "Playground administration (superusers)"

    def has_permission(self, request: HttpRequest) -> bool:
        user = request.user
        return bool(user.is_active and user.is_superuser)
