"""A judge's verdicts as the cause of usage records (source "eval-judge:<row>:<attempt>"): the
experiment each judged. Registered with `playground.usage.sources` in `EvalsConfig.ready`."""

from __future__ import annotations

from collections.abc import Collection

from django.urls import reverse

from playground.evals.models import CheckResult
from playground.usage.sources import Found


class JudgeSources:
    label = "Judge's verdict {id}"

    def resolve(self, *, team_id: int, ids: Collection[int]) -> dict[int, Found]:
        rows = CheckResult.objects.filter(target__experiment__team_id=team_id, pk__in=ids)
        return {
            pk: Found(reverse("evals:experiment-detail", args=[experiment_id]))
            for pk, experiment_id in rows.values_list("pk", "target__experiment_id")
        }
