"""Web processes of the app started as separate programs (uvicorn, honcho), on this test's database
and keys: what the multiprocess metrics and the production layout are tested with."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx
from django.conf import settings

REPO = Path(__file__).resolve().parents[2]


def database_url() -> str:
    """This test's database (its SQLite file or PostgreSQL database) as `DATABASE_URL` says it."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def app_env(data_dir: Path, **overrides: str) -> dict[str, str]:
    """The environment of a process serving this test's data: the real settings module, the test's
    database and secrets (sessions and encrypted tokens made here stay readable), plain HTTP,
    loopback upstreams allowed, and a data folder of its own."""
    env = {
        key: value for key, value in os.environ.items() if key not in ("DJANGO_SETTINGS_MODULE", "REDIS_URL")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="playground.settings",
        DATABASE_URL=database_url(),
        SECRET_KEY=settings.SECRET_KEY,
        FIELD_ENCRYPTION_KEY=settings.FIELD_ENCRYPTION_KEY,
        HTTPS="false",
        PLAYGROUND_DATA_DIR=str(data_dir),
        PROVIDER_HOST_ALLOWLIST="127.0.0.1",
        LOG_LEVEL="WARNING",
    )
    env.update(overrides)
    return env


def wait_alive(url: str, process: subprocess.Popen[bytes], *, timeout: float = 60) -> None:
    """Wait until `url` answers `/healthz`; fails at once when `process` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the process serving {url} exited ({process.returncode})"
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer /healthz")
