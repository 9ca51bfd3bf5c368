"""A real Celery worker process runs a batch, is killed with SIGKILL mid-batch, and another
finishes it: every item ends done with exactly one usage record (embedded broker and Redis).

The worker needs a database another process can open, so these tests give it its own: a
SQLite file in a temporary data folder (which also holds the filesystem broker), or, in the
services profile, a fresh PostgreSQL database on the test server. Each run reads its own
Redis queue. The batch goes to a loopback upstream whose answers take a moment each.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from pytest_django.plugin import DjangoDbBlocker

from tests.fakes.upstream import FakeUpstream, openai_chunk, sse, usage, usage_chunk
from tests.support.schema import postgres_database_from_schema_copy, sqlite_schema_copy

REPO = Path(__file__).resolve().parents[2]
ITEMS = 40
ANSWER_SECONDS = 1.5  # each answer takes this long: 40 items, 4 at a time, ~15 s in all. A status poll is a
# Python start-up (seconds on a loaded machine): at 0.6 s the batch could end between the poll
# that saw 8 done and the kill, and the test failed for want of something to kill.


def _python() -> str:
    return sys.executable


@pytest.fixture
def worker_env(
    tmp_path: Path, request: pytest.FixtureRequest, django_db_setup: None, django_db_blocker: DjangoDbBlocker
) -> Iterator[dict[str, str]]:
    broker = request.param
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="playground.settings",
        PLAYGROUND_DATA_DIR=str(tmp_path),
        PROVIDER_HOST_ALLOWLIST="127.0.0.1",
        CELERY_QUEUE=f"batches-test-{uuid.uuid4().hex[:12]}",
        BATCH_LEASE_SECONDS="3",
        BATCH_STALL_GRACE_SECONDS="2",
        BATCH_STEP_SECONDS="30",
        HTTPS="false",
        LOG_LEVEL="INFO",
    )
    dropper = None
    if broker == "redis":
        redis_url = os.environ.get("REDIS_URL") or getattr(settings, "REDIS_URL", "")
        if not redis_url:
            pytest.skip("no Redis configured (REDIS_URL): run in the services profile")
        env["REDIS_URL"] = redis_url
        if settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
            with django_db_blocker.unblock():
                env["DATABASE_URL"], dropper = _fresh_postgres_database()
    sqlite_copy = sqlite_schema_copy()
    if "DATABASE_URL" not in env and sqlite_copy is not None:  # migrated already: ~10 s of CPU less
        shutil.copyfile(sqlite_copy, tmp_path / "playground.sqlite3")
    try:
        subprocess.run([_python(), "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True)
        yield env
    finally:
        if dropper is not None:
            dropper()


def _fresh_postgres_database() -> tuple[str, Callable[[], None]]:
    import psycopg
    from psycopg.conninfo import make_conninfo

    db = settings.DATABASES["default"]
    name = f"batches_worker_{uuid.uuid4().hex[:10]}"
    conninfo = make_conninfo(
        host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], password=db["PASSWORD"], dbname="postgres"
    )
    if not postgres_database_from_schema_copy(connection, name):  # migrated already, or empty
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT'] or 5432}/{name}", drop


def _driver(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [_python(), "-m", "tests.batches.worker_driver", *args],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout.strip().splitlines()[-1]


def _status(env: dict[str, str], batch_id: str) -> dict[str, Any]:
    return json.loads(_driver(env, "status", batch_id))


def _start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            _python(),
            "-m",
            "celery",
            "-A",
            "playground",
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
            "-n",
            f"w-{uuid.uuid4().hex[:6]}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _slow_answers(upstream: FakeUpstream, count: int) -> None:
    frames = [openai_chunk("An answer."), openai_chunk(finish_reason="stop"), usage_chunk(usage(8, 3))]
    upstream.script(*[sse(frames, delay=ANSWER_SECONDS / 3) for _ in range(count)])


@pytest.mark.parametrize("worker_env", ["filesystem", "redis"], indirect=True)
def test_a_worker_killed_mid_batch_loses_no_item_and_duplicates_no_record(
    worker_env: dict[str, str],
    fake_upstream: FakeUpstream,
    tmp_path: Path,
) -> None:
    _slow_answers(fake_upstream, ITEMS * 2)
    batch_id = _driver(worker_env, "setup", fake_upstream.url + "/v1", str(ITEMS))
    log = tmp_path / "worker.log"
    first = _start_worker(worker_env, log)
    try:
        deadline = time.monotonic() + 60
        while (done := _status(worker_env, batch_id)["states"].get("done", 0)) < 8:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        killed_at = _status(worker_env, batch_id)
        assert killed_at["states"].get("done", 0) < ITEMS, "the batch finished before the kill"

        second = _start_worker(worker_env, log)
        try:
            deadline = time.monotonic() + 90
            while (status := _status(worker_env, batch_id))["status"] != "done":
                assert time.monotonic() < deadline, (status, log.read_text()[-4000:])
                time.sleep(0.5)
        finally:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait(10)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)

    assert done >= 8
    assert status["states"] == {"done": ITEMS}
    assert status["records_per_item"] == [1]  # every item exactly one usage record
    assert status["records"] == ITEMS
    assert status["linked"] == ITEMS
