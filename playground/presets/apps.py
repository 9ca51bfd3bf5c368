from __future__ import annotations

from django.apps import AppConfig


class PresetsConfig(AppConfig):
    name = "playground.presets"
