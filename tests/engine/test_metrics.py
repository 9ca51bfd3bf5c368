"""The engine's own `/metrics`: its replicas' health, queues, work, prefix-cache hits and memory, in
Prometheus text, behind the engine's token like every other route."""

from __future__ import annotations

import uuid

import httpx

from tests.support.engine import EngineProcess
from tests.support.metrics import Scrape


def scrape(engine: EngineProcess) -> Scrape:
    response = httpx.get(f"{engine.url}/metrics", headers=engine.headers, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    return Scrape.parse(response.text)


def test_metrics_show_each_replica_and_count_the_tokens_and_prefix_hits_of_its_jobs(
    running_engine: EngineProcess,
) -> None:
    engine = running_engine
    url = f"{engine.url}/client/v4/accounts/metrics-{uuid.uuid4().hex[:8]}/ai/run/{engine.model_id}"
    prompt = {
        "messages": [{"role": "user", "content": "Name three colours of the rainbow."}],
        "max_tokens": 8,
    }
    before = scrape(engine)

    # The same conversation twice to one replica: the second reads its prompt from the prefix cache.
    replicas = set()
    for _ in range(2):
        answer = httpx.post(
            url, headers={**engine.headers, "x-session-affinity": "metrics"}, json=prompt, timeout=60
        )
        assert answer.status_code == 200
        replicas.add(answer.headers["x-engine-replica"])
    after = scrape(engine)

    (replica,) = replicas
    labels = {"replica": replica, "model": engine.model_id}

    def added(name: str, **more: str) -> float:
        return after.total(name, **labels, **more) - before.total(name, **labels, **more)

    assert added("playground_engine_jobs_total") == 2
    assert added("playground_engine_tokens_total", kind="completion") > 0
    assert added("playground_engine_tokens_total", kind="cached") > 0
    assert added("playground_engine_prefix_cache_hits_total") == 1
    assert added("playground_engine_busy_seconds_total") > 0
    for listed in engine.health()["replicas"]:
        names = {"replica": str(listed["index"]), "model": listed["model"]}
        assert after.value("playground_engine_replica_up", **names) == 1
        assert after.value("playground_engine_replica_resident_memory_bytes", **names) > 10_000_000
        assert after.value("playground_engine_replica_queue_length", **names) == 0
    assert after.value("process_resident_memory_bytes") > 0  # the front end's own process


def test_metrics_need_the_engines_token(running_engine: EngineProcess) -> None:
    assert httpx.get(f"{running_engine.url}/metrics", timeout=10).status_code == 401
