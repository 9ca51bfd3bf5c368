"""Every benchmark runs, at its `--smoke` size, so that a change that breaks one fails here.

The figures of a smoke run are too small to judge a target; what counts is that each script
gets through every path it measures and prints its figures. They run side by side (most
of their time is start-up: migrations, the app server, the engine's replicas), which keeps
the whole module within a minute or two on two cores.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 240  # seconds per script: most take 5-25 s alone on two busy cores, cache_breaks.py ~100
# What each script prints once it has measured everything (its last figures).
FIGURES = {
    "stream_relay.py": r"(?m)^\s+4\s+relayed\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[+-][\d.]+ / [+-][\d.]+\s+\d+ us",
    "engine_prefix_cache.py": r"cached share: [\d.]+ % with affinity, [\d.]+ % without",
    "batch_throughput.py": r"batch throughput: [\d.]+ items/s, [\d.]+x of direct capacity",
    "usage_dashboard.py": r"csv export for data: [\d,]+ rows.*\ndashboard: worst p95 \d+ ms over \d+ rows",
    # Every gateway request answered, each with its record (the rate is too small to judge).
    "gateway_overhead.py": r"(?m)^gateway sustained: \d+ req/s .*\nrecords: (\d+) gateway requests, "
    r"\1 answered with a request id, \1 records \{'ok': \1\}, 0 missing PASS$",
    "engine_instruct.py": r"instruct pass rate: default [\d.]+ % \(\d+ of \d+\), gemma [\d.]+ %",
    # Every query timed, the rare word found exactly once (the script asserts it) on SQLite.
    "conversation_search.py": r"search sqlite: worst p95 \d+ ms, all queries p50 \d+ ms "
    r"over 2,000 conversations",
    # One session per cause and an intact one: every cause injected and judged.
    "cache_breaks.py": r"cache breaks: recall [\d.]+ % \(\d+ of \d+\), "
    r"false breaks [\d.]+ % \(\d+ of \d+ reported\)",
}


@pytest.fixture(scope="module")
def smoke_runs() -> Iterator[dict[str, subprocess.Popen[str]]]:
    """Start every benchmark at its smoke size at once; each test waits for its own."""
    # The benchmarks choose their own settings and databases: not the suite's.
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL"}
    }
    runs = {
        script: subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks" / script), "--smoke"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for script in FIGURES
    }
    try:
        yield runs
    finally:
        for process in runs.values():
            if process.poll() is None:
                process.kill()
            process.wait()


@pytest.mark.parametrize("script", list(FIGURES))
def test_the_benchmark_runs_at_its_smoke_size_and_prints_its_figures(
    smoke_runs: dict[str, subprocess.Popen[str]], script: str
) -> None:
    process = smoke_runs[script]
    try:
        output, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        pytest.fail(f"{script} --smoke took over {TIMEOUT} s:\n{output[-3000:]}")

    assert process.returncode == 0, f"{script} --smoke exited with {process.returncode}:\n{output[-3000:]}"
    assert re.search(FIGURES[script], output), f"{script} --smoke printed no figures:\n{output[-3000:]}"
