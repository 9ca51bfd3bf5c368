"""The production layout (`make run-production`, `Procfile.production`, docs/deploy.md) as CI runs it:
two web processes, a Celery worker and beat on PostgreSQL + Redis; a chat over the socket on each
web process, a gateway request, `/readyz` on both, `/metrics` summing both, then a clean stop; and
the gateway's budgets, rate limits and idempotent answers held once for both processes, not per
process.

It needs the services profile (`make test-services`): the layout refuses to start without
PostgreSQL and Redis, which is what the processes share."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from websockets.sync.client import connect

from playground.catalog.seed import KIMI_K26
from playground.celery import app as celery_app
from playground.chat.services.conversations import conversation_create
from playground.chat.sockets.paths import chat_socket_path
from playground.providers.models import ProviderConnection
from playground.usage.api_keys import api_key_issue
from tests.fakes.upstream import FakeUpstream, openai_chunk, sse, usage, usage_chunk
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.engine import free_port
from tests.support.metrics import Scrape
from tests.support.sockets import FINISHED
from tests.support.web_processes import REPO, app_env, wait_alive

pytestmark = pytest.mark.skipif(
    not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")),
    reason="the production layout runs on PostgreSQL + Redis: make test-services runs this",
)

TOKEN = "layout-scrape-secret"


@dataclass(frozen=True)
class Layout:
    process: subprocess.Popen[bytes]
    urls: list[str]
    worker: str  # the worker's Celery node name
    log: Path


def _two_free_ports() -> int:
    """A port whose next one is free too (the web processes take consecutive ports)."""
    for _ in range(50):
        first = free_port()
        try:
            with socket.create_server(("127.0.0.1", first + 1)):
                return first
        except OSError:
            continue
    raise RuntimeError("no two consecutive free ports")


@pytest.fixture
def layout(transactional_db: None, tmp_path: Path) -> Iterator[Layout]:
    first = _two_free_ports()
    env = app_env(
        tmp_path,
        REDIS_URL=os.environ["REDIS_URL"],
        WEB_CONCURRENCY="2",
        WORKER_CONCURRENCY="1",
        ENGINE_PROCESS="0",
        ENGINE_URL="http://127.0.0.1:9",  # no engine here, and no team uses one
        APP_HOST="127.0.0.1",
        APP_PORT=str(first),
        METRICS_TOKEN=TOKEN,
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
        CELERY_QUEUE=f"layout-{uuid.uuid4().hex}",  # another run's tasks are not ours to take
    )
    log = tmp_path / "layout.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "playground.prodrun"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    urls = [f"http://127.0.0.1:{first + index}" for index in range(2)]
    try:
        for url in urls:
            wait_alive(url, process, timeout=180)
        yield Layout(process, urls, worker=f"worker-{first + 100}", log=log)
    finally:  # honcho starts each process in a session of its own: only its SIGTERM stops them all
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


def _chat(url: str, session: str, conversation_id: int) -> str:
    """One turn over the chat socket of the web process at `url`; the frame with the stored answer."""
    with connect(
        url.replace("http://", "ws://") + chat_socket_path(conversation_id),
        additional_headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={session}", "Origin": url},
        open_timeout=30,
    ) as chat_socket:
        chat_socket.send(json.dumps({"action": "send", "message": "Which process answers?"}))
        while True:
            frame = str(chat_socket.recv(timeout=30))
            if FINISHED in frame:
                return frame


def _scrape(url: str) -> Scrape:
    response = httpx.get(url + "/metrics", headers={"authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert response.status_code == 200, response.text
    return Scrape.parse(response.text)


def _worker_answers(name: str) -> bool:
    replies = celery_app.control.ping(timeout=1.0) or []
    return any(node.startswith(f"{name}@") for reply in replies for node in reply)


def test_two_web_processes_worker_and_beat_serve_chats_and_the_gateway_and_stop_cleanly(
    layout: Layout, actors: Actors, workers_connection: ProviderConnection
) -> None:
    session = client_for(actors.owner).cookies[settings.SESSION_COOKIE_NAME].value
    team = str(actors.team.pk)
    _, secret = api_key_issue(
        team_id=actors.team.pk,
        name="layout",
        connection_id=workers_connection.pk,
        created_by_id=actors.owner.pk,
    )

    for url in layout.urls:  # a chat on each web process, each on a conversation of its own
        conversation = conversation_create(
            user=actors.owner, connection_id=workers_connection.pk, model_id=KIMI_K26
        )
        assert "Hello from the fake upstream." in _chat(url, session, conversation.pk)
    answer = httpx.post(
        layout.urls[1] + "/v1/chat/completions",
        headers={"authorization": f"Bearer {secret}"},
        json={"model": KIMI_K26, "messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text

    for url in layout.urls:
        ready = httpx.get(url + "/readyz", headers={"authorization": f"Bearer {TOKEN}"}, timeout=5)
        assert ready.status_code == 200, ready.text
        assert {"database", "redis", "broker"} <= set(ready.json()["checks"]), ready.json()
    deadline = time.monotonic() + 20  # a record is counted once it commits, after its answer
    while time.monotonic() < deadline:
        sums = [_scrape(url) for url in layout.urls]
        if all(s.total("playground_requests_total", team=team) == 3 for s in sums):
            break
        time.sleep(0.2)
    for scrape in sums:  # either process reports both processes' counts
        assert scrape.total("playground_requests_total", path="chat", team=team) == 2
        assert scrape.total("playground_requests_total", path="gateway", team=team) == 1
    deadline = time.monotonic() + 60
    while not _worker_answers(layout.worker):
        assert time.monotonic() < deadline, (
            f"the worker never answered a ping: {layout.log.read_text()[-2000:]}"
        )
    assert layout.process.poll() is None, "a process of the layout stopped (honcho stops them all)"

    layout.process.send_signal(signal.SIGTERM)

    assert layout.process.wait(60) == 0, layout.log.read_text()[-2000:]
    for url in layout.urls:
        with pytest.raises(httpx.TransportError):
            httpx.get(url + "/healthz", timeout=2)
    assert not _worker_answers(layout.worker)


def _gateway_post(url: str, secret: str, **headers: str) -> httpx.Response:
    return httpx.post(
        url + "/v1/chat/completions",
        headers={"authorization": f"Bearer {secret}", **headers},
        json={"model": KIMI_K26, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1000},
        timeout=60,
    )


def _issue(actors: Actors, connection: ProviderConnection, name: str, **limits: Any) -> str:
    _, secret = api_key_issue(
        team_id=actors.team.pk,
        name=name,
        connection_id=connection.pk,
        created_by_id=actors.owner.pk,
        **limits,
    )
    return secret


def test_two_web_processes_hold_one_rate_limit_one_budget_and_one_idempotent_answer_per_key(
    layout: Layout, actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    first, second = layout.urls

    limited = _issue(actors, workers_connection, "rpm-3", requests_per_minute=3)
    statuses = [_gateway_post(url, limited).status_code for url in (first, second) * 3]
    assert sorted(statuses) == [200, 200, 200, 429, 429, 429], statuses  # not 3 per process

    replayable = _issue(actors, workers_connection, "idempotent")
    sent = len(fake_upstream.requests)
    original = _gateway_post(first, replayable, **{"idempotency-key": "order-7"})
    replay = _gateway_post(second, replayable, **{"idempotency-key": "order-7"})
    assert original.status_code == replay.status_code == 200, replay.text
    assert replay.headers.get("idempotent-replayed") == "true"
    assert replay.json() == original.json()
    assert len(fake_upstream.requests) == sent + 1  # the other process did not call again

    # worst case per request on Kimi K2.6: ~2 prompt tokens x $0.95/M + 1,000 x $4.00/M, about $0.004:
    # the budget covers three such holds; twelve at once, half on each process, while answers are slow
    capped = _issue(actors, workers_connection, "covers-three", monthly_budget_usd=Decimal("0.0125"))
    slow = sse(
        [openai_chunk("ok"), openai_chunk(finish_reason="stop"), usage_chunk(usage(2, 1))], first_delay=1.0
    )
    fake_upstream.script(*[slow] * 12)
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda url: _gateway_post(url, capped), (first, second) * 6))
    admitted = [answer.status_code for answer in answers].count(200)
    assert 1 <= admitted <= 3, [answer.status_code for answer in answers]
    assert [answer.status_code for answer in answers].count(402) == 12 - admitted
