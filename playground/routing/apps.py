from __future__ import annotations

from django.apps import AppConfig


class RoutingConfig(AppConfig):
    name = "playground.routing"
    default_auto_field = "django.db.models.BigAutoField"
