from __future__ import annotations

from django.apps import AppConfig


class BatchesConfig(AppConfig):
    name = "playground.batches"
    label = "batches"
    verbose_name = "Batches"

    def ready(self) -> None:
        # The Celery app, configured from the settings, becomes the current app in every Django
        # process (web, commands, worker), so a `shared_task` enqueued there goes to our broker.
        # The package `__init__` no longer builds it: the engine must start without Celery.
        import playground.celery  # noqa: F401
        from playground.batches import tasks  # noqa: F401  (registers the tasks and the worker_ready hook)
        from playground.batches.erasure import BatchEraser
        from playground.batches.sources import BatchItemSources
        from playground.usage import erasure, sources

        sources.resolvers.register(sources.BATCH_ITEM, BatchItemSources())
        erasure.erasers.register("batches", BatchEraser())
