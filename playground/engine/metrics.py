"""The engine's own Prometheus metrics (`GET /metrics`, behind the same bearer token as every route).

The front end counts what its replicas report (`ReplicaWork`, plain numbers bumped on the event
loop as job events arrive), and `EngineCollector` turns them, with the replicas' state, their
memory and the durable batch queue, into metric families at scrape time. Nothing is stored the
way `prometheus_client`'s own counters store values, so the engine writes no file even when
`make run` gives it `PROMETHEUS_MULTIPROC_DIR` with the web processes: their `/metrics` never sums
the engine's, which Prometheus scrapes on its own port.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from playground.engine.batch_queue import BatchQueue
from playground.engine.protocol import Event, Failed, Finished, Started

if TYPE_CHECKING:
    from playground.engine.pool import ReplicaPool

_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass
class ReplicaWork:
    """What one replica has done since the engine started (across its restarts)."""

    jobs: Counter[str] = field(default_factory=Counter)  # by finish reason, or "failed"
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens whose KV came from the prefix cache (or the live sequence)
    prefix_hits: int = 0  # jobs that reused any cached prefix
    completion_tokens: int = 0
    busy_seconds: float = 0.0  # from each job's start (prompt read) to its end
    _started: float | None = None

    def observe(self, event: Event) -> None:
        if isinstance(event, Started):
            self._started = time.monotonic()
        elif isinstance(event, Finished):
            self.jobs[event.finish_reason] += 1
            self.prompt_tokens += event.prompt_tokens
            self.cached_tokens += event.cached_tokens
            self.prefix_hits += event.cached_tokens > 0
            self.completion_tokens += event.completion_tokens
            self._end()
        elif isinstance(event, Failed):
            self.jobs["failed"] += 1
            self._end()

    def _end(self) -> None:
        if self._started is not None:
            self.busy_seconds += time.monotonic() - self._started
            self._started = None


def resident_bytes(pid: int) -> int | None:
    """A process's resident memory, from /proc (None where there is none, or the process is gone)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * _PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return None


class EngineCollector(Collector):
    """The replicas' health, queues, work and memory, and the batch queue, read when scraped."""

    def __init__(self, pool: ReplicaPool, queue: BatchQueue) -> None:
        self.pool = pool
        self.queue = queue

    def collect(self) -> Iterable[Metric]:
        labels = ["replica", "model"]
        up = GaugeMetricFamily(
            "playground_engine_replica_up", "1 when the replica is ready to serve.", labels=labels
        )
        restarts = CounterMetricFamily(
            "playground_engine_replica_restarts",
            "Times the replica was restarted after its process died.",
            labels=labels,
        )
        queued = GaugeMetricFamily(
            "playground_engine_replica_queue_length",
            "Interactive jobs waiting for the replica, plus the one it runs.",
            labels=labels,
        )
        memory = GaugeMetricFamily(
            "playground_engine_replica_resident_memory_bytes",
            "The replica process's resident memory.",
            labels=labels,
        )
        jobs = CounterMetricFamily(
            "playground_engine_jobs",
            "Jobs the replica ended, by finish reason (or failed).",
            labels=[*labels, "outcome"],
        )
        tokens = CounterMetricFamily(
            "playground_engine_tokens",
            "Tokens the replica read (prompt; cached: the part of it read from its prefix cache) "
            "and wrote (completion).",
            labels=[*labels, "kind"],
        )
        hits = CounterMetricFamily(
            "playground_engine_prefix_cache_hits", "Jobs whose prompt reused a cached prefix.", labels=labels
        )
        busy = CounterMetricFamily(
            "playground_engine_busy_seconds", "Time the replica spent running jobs.", labels=labels
        )
        for replica in self.pool.replicas:
            names = [str(replica.index), replica.model_id]
            work = replica.work
            up.add_metric(names, 1 if replica.ready else 0)
            restarts.add_metric(names, replica.restarts)
            queued.add_metric(names, replica.load)
            process = replica.process
            if (
                process is not None
                and process.pid is not None
                and (rss := resident_bytes(process.pid)) is not None
            ):
                memory.add_metric(names, rss)
            for outcome, count in sorted(work.jobs.items()):
                jobs.add_metric([*names, outcome], count)
            tokens.add_metric([*names, "prompt"], work.prompt_tokens)
            tokens.add_metric([*names, "cached"], work.cached_tokens)
            tokens.add_metric([*names, "completion"], work.completion_tokens)
            hits.add_metric(names, work.prefix_hits)
            busy.add_metric(names, work.busy_seconds)
        return [up, restarts, queued, memory, jobs, tokens, hits, busy, *self._batch_queue()]

    def _batch_queue(self) -> list[Metric]:
        items = GaugeMetricFamily(
            "playground_engine_batch_items",
            "Items of queued batches (?queueRequest=true) not done: queued or running.",
            labels=["model", "state"],
        )
        age = GaugeMetricFamily(
            "playground_engine_batch_oldest_seconds",
            "Age of the oldest queued batch with items not done.",
            labels=["model"],
        )
        now = time.time()
        oldest: dict[str, float] = {}
        for model, state, count, created in self.queue.waiting():
            items.add_metric([model, state], count)
            oldest[model] = max(oldest.get(model, 0.0), now - created)
        for model, seconds in oldest.items():
            age.add_metric([model], seconds)
        return [items, age]


def engine_registry(pool: ReplicaPool, queue: BatchQueue) -> CollectorRegistry:
    """What `/metrics` serves: the engine's figures and the front end's own process (CPU, memory)."""
    registry = CollectorRegistry()
    registry.register(EngineCollector(pool, queue))
    ProcessCollector(registry=registry)
    return registry
