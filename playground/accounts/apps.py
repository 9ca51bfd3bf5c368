from __future__ import annotations

from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class AccountsConfig(AppConfig):
    name = "playground.accounts"
    default = True


class SuperuserAdminConfig(admin_apps.AdminConfig):
    """`django.contrib.admin` with `admin.site` replaced by the superuser-only site."""

    default = False  # listed by its full path in INSTALLED_APPS
    default_site = "playground.accounts.admin_site.SuperuserAdminSite"
