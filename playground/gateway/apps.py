from __future__ import annotations

from django.apps import AppConfig


class GatewayConfig(AppConfig):
    name = "playground.gateway"
    default_auto_field = "django.db.models.BigAutoField"
