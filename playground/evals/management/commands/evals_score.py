"""Store the verdicts of experiments answered before verdicts were stored (or whose scoring a
dead worker left unfinished): the fixed checks at once, the judges' calls made here."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from playground.evals.models import CheckResult, ExperimentTarget
from playground.evals.services.scoring import target_score


class Command(BaseCommand):
    help = "Score every answered experiment item that has no stored verdicts yet."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--experiment", type=int, help="Only this experiment (its id).")

    def handle(self, *args: Any, **options: Any) -> None:
        targets = ExperimentTarget.objects.filter(batch__isnull=False)
        if options["experiment"]:
            targets = targets.filter(experiment_id=options["experiment"])
        for target in targets.order_by("pk"):
            before = CheckResult.objects.filter(target=target).count()
            while target_score(target_id=target.pk):
                pass
            added = CheckResult.objects.filter(target=target).count() - before
            self.stdout.write(f"experiment {target.experiment_id}, {target.label}: {added} verdicts stored")
