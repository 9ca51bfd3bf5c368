from __future__ import annotations

from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "playground.evals"
    label = "evals"
    verbose_name = "Evaluations"
