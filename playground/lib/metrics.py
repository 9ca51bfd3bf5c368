"""The Prometheus metrics of the web and worker processes: every one is named here, and scraped here.

One module names them all, so that the dashboard (`docs/grafana-dashboard.json`) and
`docs/operations.md` have one place to agree with. What counts them:

- the one record writer (`usage.records`, through `usage.metrics`): requests, tokens, cost,
  latency, time to first token and routing outcomes, once the record commits;
- the refusals that write no record: a rate limit (`gateway.ratelimits`, `chat.limits`) and a
  routing target put in cooldown (`routing.cooldown`).

**Multiprocess mode.** With `PROMETHEUS_MULTIPROC_DIR` set (`make run` sets and empties it), each
process writes its values to memory-mapped files of its own in that folder, and a scrape sums
every process's files, so N web processes and the Celery worker count as one. The variable must be
set before `prometheus_client` is imported (it chooses how values are stored then); without it a
process counts alone, which is right for one web process and nothing else.

**Labels are bounded**: the request path, the status, team and connection ids, and model ids (which
`usage.metrics` bounds too); never a user, an end user, a session, a key or a request id.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

CONTENT_TYPE = CONTENT_TYPE_LATEST
MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"

# Every label names something the deployment has a bounded number of.
REQUEST_LABELS = ("path", "status", "team", "connection", "model")
# Histograms keep 10+ series per label set: no team, no status (latency is the upstream's).
TIMING_LABELS = ("path", "connection", "model")

REQUESTS = Counter(
    "playground_requests", "Requests sent upstream, by the usage record each one wrote.", REQUEST_LABELS
)
TOKENS = Counter(
    "playground_tokens",
    "Tokens of the recorded requests; kind=input counts every prompt token, "
    "cached and cache-written ones included.",
    ("kind", "path", "team", "connection", "model"),
)
COST = Counter(
    "playground_cost_usd",
    "Cost of the recorded requests in US dollars, by their price cards (unpriced requests add nothing).",
    ("path", "team", "connection", "model"),
)
LATENCY = Histogram(
    "playground_request_latency_seconds",
    "Time from sending a request upstream to its last byte.",
    TIMING_LABELS,
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
TTFT = Histogram(
    "playground_time_to_first_token_seconds",
    "Time from sending a request upstream to its first token.",
    TIMING_LABELS,
    buckets=(0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)
ROUTING_OUTCOMES = Counter(
    "playground_routing_outcomes",
    "Routed requests that fell back to another target or were downgraded, by their records.",
    ("outcome", "team"),
)
ROUTING_COOLDOWNS = Counter(
    "playground_routing_cooldowns",
    "Routing targets put in cooldown after failing in a row.",
    ("connection", "model"),
)
RATE_LIMIT_REFUSALS = Counter(
    "playground_rate_limit_refusals",
    "Requests and chat turns refused by a rate or concurrency limit (nothing sent, no record).",
    ("scope", "limit"),
)


class _Scrape(Collector):
    """What one scrape reads: the counters (every process's, in multiprocess mode), then the figures
    computed at scrape time, each left out (and logged) when it fails: a database that is down
    must not hide the counters."""

    def __init__(self, counted: Collector, computed: Sequence[Collector]) -> None:
        self.counted = counted
        self.computed = computed

    def collect(self) -> Iterable[Metric]:
        yield from self.counted.collect()
        for collector in self.computed:
            try:
                metrics = list(collector.collect())
            except Exception:
                logger.exception("metrics: %s failed; its figures are left out", type(collector).__name__)
                continue
            yield from metrics


def metrics_exposition(computed: Sequence[Collector] = ()) -> bytes:
    """The Prometheus text of the counters, then of `computed` (collectors that read the database at
    scrape time). Blocking: reads the multiprocess files, and `computed` may query."""
    directory = os.environ.get(MULTIPROCESS_DIR)
    counted: Collector = REGISTRY
    if directory:
        counted = MultiProcessCollector(None, path=directory)  # type: ignore[no-untyped-call]  # untyped upstream
    return generate_latest(_Scrape(counted, computed))
