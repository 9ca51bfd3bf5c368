from __future__ import annotations

from django.apps import AppConfig


class BatchesConfig(AppConfig):
    name = "playground.batches"
    label = "batches"
    verbose_name = "Batches"

    def ready(self) -> None:
        from playground.batches import tasks  # noqa: F401  (registers the tasks and the worker_ready hook)
