"""The production layout (`make run-production`, `Procfile.production`, docs/deploy.md) as CI runs it
once: two web processes, a Celery worker and beat on PostgreSQL + Redis; a chat over the socket on
each web process, a gateway request, `/readyz` on both, `/metrics` summing both, then a clean stop.

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
from dataclasses import dataclass
from pathlib import Path

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
