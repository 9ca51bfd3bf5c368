"""The real engine (`python -m playground.engine`) as a subprocess, for tests.

`running_engine` starts one engine per test session (two replicas of the default model,
SmolLM2, and one of Gemma; a small context) and yields an `EngineProcess` with `.url`,
`.token` and `.model_id` (the default model's; `GEMMA` is the other); every test package may
ask for it (`pytest_plugins` in tests/conftest.py registers this module).

`start_engine` starts an extra, short-lived engine (e.g. to restart one on the same queue);
`spawn_engine` starts one without waiting for it to become healthy (e.g. one that must fail).
`served_engine` is the `actors` team's engine connection with the app pointed at that engine.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from playground.engine.config import DEFAULT_MODEL_ID, GEMMA_MODEL_ID

if TYPE_CHECKING:  # the benchmarks import this module without Django set up: models only when typed
    from playground.providers.models import ProviderConnection
    from tests.support.actors import Actors

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL_ID = DEFAULT_MODEL_ID
GEMMA = GEMMA_MODEL_ID
STARTUP_TIMEOUT = 300.0  # a first start may assemble or fetch the model files


@dataclass
class EngineProcess:
    url: str
    token: str
    model_id: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"}

    def run_url(self, model: str | None = None) -> str:
        return f"{self.url}/client/v4/accounts/test/ai/run/{model or self.model_id}"

    def replicas_of(self, model: str | None = None) -> list[dict[str, Any]]:
        """The replicas `/healthz` lists for `model` (the default model's when None)."""
        return [
            replica for replica in self.health()["replicas"] if replica["model"] == (model or self.model_id)
        ]

    def health(self) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/healthz", headers=self.headers, timeout=5)
        response.raise_for_status()
        return response.json()

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def wait_until_healthy(self, timeout: float = STARTUP_TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"The engine exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                health = self.health()
                if health["status"] == "ok":
                    return health
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"The engine was not healthy within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, *, hard: bool = False) -> None:
        """SIGTERM (graceful) or SIGKILL (a crash) to the engine and its replicas."""
        if self.process.poll() is None:
            if hard:
                os.killpg(self.process.pid, signal.SIGKILL)
            else:
                self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=20)
        # The replicas share the engine's process group: none may outlive it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spawn_engine(
    workdir: Path,
    *,
    replicas: int = 2,
    gemma_replicas: int = 1,
    context_size: int = 2048,
    queue_path: Path | None = None,
    token: str | None = None,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> EngineProcess:
    """Start an engine process; `env` and `args` add to the test defaults."""
    token = token or secrets.token_urlsafe(24)
    port = free_port()
    # The engine is configured here and nowhere else: drop ENGINE_* settings of the shell.
    environment = {name: value for name, value in os.environ.items() if not name.startswith("ENGINE_")}
    environment.update(
        ENGINE_API_TOKEN=token,
        ENGINE_QUEUE_PATH=str(queue_path or workdir / "queue.sqlite3"),
        ENGINE_CACHE_DIR=str(REPO_ROOT / "var" / "models"),
        ENGINE_LOG_LEVEL="INFO",
        **(env or {}),
    )
    command = [
        sys.executable,
        "-m",
        "playground.engine",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--replicas",
        str(replicas),
        "--gemma-replicas",
        str(gemma_replicas),
        "--context-size",
        str(context_size),
        *args,
    ]
    log_path = workdir / f"engine-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return EngineProcess(
        url=f"http://127.0.0.1:{port}", token=token, model_id=MODEL_ID, process=process, log_path=log_path
    )


def start_engine(workdir: Path, **options: Any) -> EngineProcess:
    """`spawn_engine`, then wait until every replica has passed its self-test."""
    engine = spawn_engine(workdir, **options)
    try:
        engine.wait_until_healthy()
    except BaseException:
        engine.stop(hard=True)
        raise
    return engine


@pytest.fixture(scope="session")
def running_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineProcess]:
    engine = start_engine(tmp_path_factory.mktemp("engine"))
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture
def served_engine(
    settings: Any, running_engine: EngineProcess, actors: Actors, catalogue: None
) -> ProviderConnection:
    """The team's engine connection, the app's `ENGINE_URL` and token those of `running_engine`."""
    from playground.providers.services import connection_engine_ensure

    settings.ENGINE_URL, settings.ENGINE_API_TOKEN = running_engine.url, running_engine.token
    return connection_engine_ensure(team=actors.team)
