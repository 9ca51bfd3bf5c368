"""Stopping the engine: a stop sent to its whole process group (Ctrl-C under `make run`, whose
honcho sends SIGTERM to each process group; systemd's control-group stop) ends it cleanly."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.engine import spawn_engine, start_engine


def _wait_until(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


def _ignores_sigterm(pid: int) -> bool:
    """Whether the process has set SIGTERM aside yet (Linux: the SigIgn mask in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    ignored = re.search(r"^SigIgn:\s*([0-9a-f]+)$", status, re.MULTILINE)
    return ignored is not None and bool(int(ignored.group(1), 16) & (1 << (signal.SIGTERM - 1)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_stop_sent_to_the_group_ends_the_engine_without_restarting_its_replicas(tmp_path: Path) -> None:
    engine = start_engine(tmp_path, replicas=2)
    try:
        pids = [replica["pid"] for replica in engine.health()["replicas"]]
        os.killpg(engine.process.pid, signal.SIGTERM)
        code = engine.process.wait(timeout=60)
        _wait_until(lambda: not any(_alive(pid) for pid in pids), timeout=10)
        log = engine.log_path.read_text(errors="replace")
    finally:
        engine.stop(hard=True)

    assert code in (0, -signal.SIGTERM), log  # uvicorn ends by re-raising the signal it caught
    assert log.count("starting (pid") == 3, (
        log
    )  # the first starts (two and Gemma's), no restart while stopping
    assert "exited with code" not in log, log
    assert "Traceback" not in log, log
    assert not [pid for pid in pids if _alive(pid)]


def test_a_stop_while_the_replicas_load_leaves_none_behind_and_no_traceback(tmp_path: Path) -> None:
    """The front end dies at once (its handlers are not set yet); the replicas, which ignore the
    group's SIGTERM, end quietly when they next find their pipe closed."""
    engine = spawn_engine(tmp_path, replicas=2)
    try:
        starts = re.compile(r"replica \d of \S+ starting \(pid (\d+)\)")
        _wait_until(lambda: len(starts.findall(engine.log_path.read_text(errors="replace"))) == 3, timeout=60)
        pids = [int(pid) for pid in starts.findall(engine.log_path.read_text(errors="replace"))]
        assert len(pids) == 3
        _wait_until(lambda: all(_ignores_sigterm(pid) for pid in pids), timeout=60)  # now loading
        os.killpg(engine.process.pid, signal.SIGTERM)
        engine.process.wait(timeout=60)
        _wait_until(lambda: not any(_alive(pid) for pid in pids), timeout=60)
        log = engine.log_path.read_text(errors="replace")
    finally:
        engine.stop(hard=True)

    assert not [pid for pid in pids if _alive(pid)], log
    assert "Traceback" not in log, log
