from __future__ import annotations

from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "playground.teams"
    label = "teams"
    verbose_name = "Team pages"
