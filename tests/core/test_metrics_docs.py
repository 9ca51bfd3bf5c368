"""The Grafana dashboard asks only for metrics the code exposes, and docs/operations.md lists each
one the code exposes and names no other: a metric renamed in the code fails here, not in a Grafana."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

import pytest
from prometheus_client import Counter, Histogram
from prometheus_client.metrics_core import Metric

from playground.batches.metrics import BatchQueueCollector
from playground.engine.batch_queue import BatchQueue
from playground.engine.metrics import EngineCollector
from playground.engine.pool import ReplicaPool
from playground.lib import metrics
from playground.usage.metrics import BudgetCollector

DOCS = Path(__file__).resolve().parents[2] / "docs"
NAME = re.compile(r"\bplayground_[a-z_]+")


def families(tmp_path: Path) -> list[Metric]:
    """Every metric family the web app, the worker and the engine expose (samples or not)."""
    counted = [
        family
        for metric in vars(metrics).values()
        if isinstance(metric, Counter | Histogram)
        for family in metric.collect()
    ]
    queue = BatchQueue(tmp_path / "queue.sqlite3")
    engine = EngineCollector(ReplicaPool([], queue=queue, batch_spec=lambda item: pytest.fail()), queue)
    try:
        computed: Iterable[Metric] = [
            *BudgetCollector().collect(),
            *BatchQueueCollector().collect(),
            *engine.collect(),
        ]
        return [*counted, *computed]
    finally:
        queue.close()


def documented(family: Metric) -> str:
    """The name docs/operations.md gives: a counter with its `_total`, others as they are."""
    return f"{family.name}_total" if family.type == "counter" else family.name


def sample_names(family: Metric) -> set[str]:
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(family.type, [""])
    return {family.name + suffix for suffix in suffixes}


@pytest.mark.django_db
def test_the_dashboard_queries_only_metrics_the_code_exposes(tmp_path: Path) -> None:
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    queries += [
        variable["query"]["query"]
        for variable in dashboard["templating"]["list"]
        if variable["type"] == "query"
    ]
    exposed = {name for family in families(tmp_path) for name in sample_names(family)}

    asked = {name for query in queries for name in NAME.findall(query)}

    assert asked - exposed == set()
    assert len(asked) > 20


@pytest.mark.django_db
def test_the_operations_guide_lists_every_metric_and_only_those(tmp_path: Path) -> None:
    listed = set(NAME.findall((DOCS / "operations.md").read_text()))
    exposed = families(tmp_path)

    assert {documented(family) for family in exposed} - listed == set()
    # Besides the tables' names, its example queries name samples (a histogram's `_bucket`).
    assert (
        listed - {name for family in exposed for name in {documented(family), *sample_names(family)}} == set()
    )
