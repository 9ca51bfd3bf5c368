from __future__ import annotations

from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "playground.evals"
    label = "evals"
    verbose_name = "Evaluations"

    def ready(self) -> None:
        from celery.signals import task_postrun

        from playground.batches.tasks import batch_step
        from playground.evals import tasks
        from playground.evals.erasure import EvalsEraser
        from playground.evals.services.scoring import JUDGE_SOURCE
        from playground.evals.sources import JudgeSources
        from playground.usage import erasure, sources

        # After each step of a batch, in the worker: an experiment's answers are scored.
        task_postrun.connect(tasks.after_batch_step, sender=batch_step, weak=False)
        sources.resolvers.register(JUDGE_SOURCE, JudgeSources())
        erasure.erasers.register("evals", EvalsEraser())
