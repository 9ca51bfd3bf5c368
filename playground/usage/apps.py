from __future__ import annotations

from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "playground.usage"
