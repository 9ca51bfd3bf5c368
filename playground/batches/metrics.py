"""The batch queue in the Prometheus metrics, read at scrape time: how many items of running batches
wait, and how long the oldest has waited, per team.

An operator's read of every team (the scrape is no user's request), so it lives here rather than
among the user-scoped `selectors`: one query, grouped by team.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, Min, Q
from django.utils import timezone
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from playground.batches.models import BatchItem, BatchStatus, ItemState

WAITING = (ItemState.PENDING, ItemState.SUBMITTED)  # not sent yet; sent to a provider's queue


class BatchQueueCollector(Collector):
    def collect(self) -> Iterable[Metric]:
        items = GaugeMetricFamily(
            "playground_batch_items_waiting",
            "Items of running batches not finished: pending (not sent) or submitted (in a provider's queue).",
            labels=["team", "state"],
        )
        age = GaugeMetricFamily(
            "playground_batch_oldest_waiting_seconds",
            "Age of the oldest running batch that still has items waiting, since it was submitted.",
            labels=["team"],
        )
        now = timezone.now()
        rows = (
            BatchItem.objects.filter(state__in=WAITING, batch__status=BatchStatus.RUNNING)
            .values_list("batch__team_id")
            .annotate(
                pending=Count("id", filter=Q(state=ItemState.PENDING)),
                submitted=Count("id", filter=Q(state=ItemState.SUBMITTED)),
                since=Min("batch__submitted_at"),
            )
        )
        for team_id, pending, submitted, since in rows:
            team = str(team_id)
            items.add_metric([team, ItemState.PENDING], pending)
            items.add_metric([team, ItemState.SUBMITTED], submitted)
            if since is not None:
                age.add_metric([team], (now - since).total_seconds())
        return [items, age]
