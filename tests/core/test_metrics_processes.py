"""Two real web processes (uvicorn, as the Procfile runs them) count into one multiprocess folder,
and `/metrics` on either says the sum: what N web processes and the worker do in production.

Both serve this test's database (its SQLite file or PostgreSQL database) with the test's keys, so
they see the team, the connection and the API key made here. Requests go through each process's
gateway to the loopback fake upstream."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from playground.providers.models import ProviderConnection
from playground.usage.api_keys import api_key_issue
from tests.support.actors import Actors
from tests.support.engine import free_port
from tests.support.metrics import Scrape

REPO = Path(__file__).resolve().parents[2]
TOKEN = "scrape-secret"
MODEL = "gateway-model"
# The Procfile's web command, on loopback.
WEB = [sys.executable, "-m", "uvicorn", "playground.asgi:application", "--host", "127.0.0.1",
       "--no-access-log", "--lifespan", "off", "--log-level", "warning"]  # fmt: skip


def database_url() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def web_processes(transactional_db: None, tmp_path: Path) -> Iterator[list[str]]:
    env = {
        key: value for key, value in os.environ.items() if key not in ("DJANGO_SETTINGS_MODULE", "REDIS_URL")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="playground.settings",
        DATABASE_URL=database_url(),
        SECRET_KEY=settings.SECRET_KEY,
        FIELD_ENCRYPTION_KEY=settings.FIELD_ENCRYPTION_KEY,  # the connection's token is encrypted with it
        HTTPS="false",
        PLAYGROUND_DATA_DIR=str(tmp_path),
        PROVIDER_HOST_ALLOWLIST="127.0.0.1",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
        METRICS_TOKEN=TOKEN,
        LOG_LEVEL="WARNING",
    )
    (tmp_path / "staticfiles").mkdir()  # ServeStatic warns about a missing static root
    ports = [free_port(), free_port()]
    processes = [subprocess.Popen([*WEB, "--port", str(port)], cwd=REPO, env=env) for port in ports]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for url, process in zip(urls, processes, strict=True):
            _wait_alive(url, process)
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(10)


def _wait_alive(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "the web process exited"
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer /healthz")


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
