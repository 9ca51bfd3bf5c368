"""Two real web processes (uvicorn, as the Procfile runs them) count into one multiprocess folder,
and `/metrics` on either says the sum: what N web processes and the worker do in production.

Both serve this test's database (its SQLite file or PostgreSQL database) with the test's keys, so
they see the team, the connection and the API key made here. Requests go through each process's
gateway to the loopback fake upstream."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from playground.providers.models import ProviderConnection
from playground.usage.api_keys import api_key_issue
from tests.support.actors import Actors
from tests.support.engine import free_port
from tests.support.metrics import Scrape
from tests.support.web_processes import REPO, app_env, wait_alive

TOKEN = "scrape-secret"
MODEL = "gateway-model"
# The Procfile's web command, on loopback.
WEB = [sys.executable, "-m", "uvicorn", "playground.asgi:application", "--host", "127.0.0.1",
       "--no-access-log", "--lifespan", "off", "--log-level", "warning"]  # fmt: skip


@pytest.fixture
def web_processes(transactional_db: None, tmp_path: Path) -> Iterator[list[str]]:
    env = app_env(tmp_path, PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"), METRICS_TOKEN=TOKEN)
    (tmp_path / "staticfiles").mkdir()  # ServeStatic warns about a missing static root
    ports = [free_port(), free_port()]
    processes = [subprocess.Popen([*WEB, "--port", str(port)], cwd=REPO, env=env) for port in ports]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for url, process in zip(urls, processes, strict=True):
            wait_alive(url, process)
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(10)


def scrape(url: str) -> Scrape:
    response = httpx.get(url + "/metrics", headers={"authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert response.status_code == 200
    return Scrape.parse(response.text)


def test_metrics_scraped_from_either_process_sum_the_requests_of_both(
    web_processes: list[str], actors: Actors, openai_connection: ProviderConnection, tmp_path: Path
) -> None:
    _, secret = api_key_issue(
        team_id=actors.team.pk, name="ci", connection_id=openai_connection.pk, created_by_id=actors.owner.pk
    )
    first, second = web_processes
    for url, count in ((first, 3), (second, 2)):
        for n in range(count):
            answer = httpx.post(
                url + "/v1/chat/completions",
                headers={"authorization": f"Bearer {secret}"},
                json={"model": MODEL, "messages": [{"role": "user", "content": f"question {n}"}]},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
    labels = {
        "path": "gateway",
        "status": "ok",
        "team": str(actors.team.pk),
        "connection": str(openai_connection.pk),
        "model": MODEL,
    }

    deadline = time.monotonic() + 10  # each record is counted once it commits, after its answer
    while scrape(first).value("playground_requests_total", **labels) < 5 and time.monotonic() < deadline:
        time.sleep(0.1)

    for url in (first, second):
        sums = scrape(url)
        assert sums.value("playground_requests_total", **labels) == 5
        assert sums.total("playground_tokens_total", kind="output", team=labels["team"]) > 0
        assert sums.total("playground_request_latency_seconds_count", model=MODEL) == 5
    counted_by = sorted(path.name for path in (tmp_path / "metrics").glob("counter_*.db"))
    assert len(counted_by) == 2  # one file per process, summed at scrape
    assert httpx.get(first + "/metrics", timeout=5).status_code == 401  # the token is required
