from __future__ import annotations

from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "playground.alerts"
    default_auto_field = "django.db.models.BigAutoField"
