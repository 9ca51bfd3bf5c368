"""Every benchmark runs, at its `--smoke` size, so that a change that breaks one fails here.

The figures of a smoke run are too small to judge a target; what counts is that each script
gets through every path it measures and prints its figures. They run as many at once as there
are cores (most of their time is start-up: migrations, the app server, the engine's replicas),
each timed from its own start.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.schema import TEMPLATE_VARIABLE
from tests.support.schema import sqlite_schema_copy

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 240  # seconds per script: most take 5-25 s alone on two busy cores
# cache_breaks.py takes ~100 s alone (its corpus runs on the engine's three replicas), and over
# 240 s beside a second suite in CI: it starts first and has more time.
TIMEOUTS = {"cache_breaks.py": 480}
# What each script prints once it has measured everything (its last figures).
FIGURES = {
    # One session per cause and an intact one: every cause injected and judged.
    "cache_breaks.py": r"cache breaks: recall [\d.]+ % \(\d+ of \d+\), "
    r"false breaks [\d.]+ % \(\d+ of \d+ reported\)",
    "stream_relay.py": r"(?m)^\s+4\s+relayed\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[+-][\d.]+ / [+-][\d.]+\s+\d+ us",
    "engine_prefix_cache.py": r"cached share: [\d.]+ % with affinity, [\d.]+ % without",
    "batch_throughput.py": r"batch throughput: [\d.]+ items/s, [\d.]+x of direct capacity",
    # Both runs recorded every item (the script asserts it), the experiment's with its verdicts.
    "experiment_throughput.py": r"experiment throughput: [\d.]+ items/s, [\d.]+x of the batch queue's "
    r"[\d.]+ items/s",
    "usage_dashboard.py": r"csv export for data: [\d,]+ rows.*\ndashboard: worst p95 \d+ ms over \d+ rows",
    # Every gateway request answered, each with its record, the routed key's CPU beside the plain
    # key's (the rate and the ratio are too small to judge).
    "gateway_overhead.py": r"(?m)^gateway sustained: \d+ req/s .*\nrouted \(3 rules, .*\): web CPU [\d.]+ "
    r"ms/req vs [\d.]+ ms/req plain, [+-][\d.]+ % .*\nrecords: (\d+) gateway requests, "
    r"\1 answered with a request id, \1 records \{'ok': \1\}, 0 missing PASS$",
    "engine_instruct.py": r"instruct pass rate: default [\d.]+ % \(\d+ of \d+\), gemma [\d.]+ %",
    # Every schema answer parses, even at a smoke size: the engine closes them by construction.
    "schema_close.py": r"schema close: default (\d+) of \1 parsed .*, gemma (\d+) of \2 parsed",
    # Every query timed, the rare word found exactly once (the script asserts it) on SQLite.
    "conversation_search.py": r"search sqlite: worst p95 \d+ ms, all queries p50 \d+ ms "
    r"over 2,000 conversations",
    # Every write chained and the chain verified intact (the script asserts it).
    "audit_chain.py": r"audit chain sqlite: [+-][\d.]+ ms per audit write \(p50 .*\), "
    r"verify \d+ ms per 1,000 entries",
    # Ours and direct only (`--peers` with none: the test installs nothing): every answer's text
    # is the direct one's and every request through ours left its record.
    "gateway_peers.py": r"(?ms)^\s+ours\s+\d+\s+1\.00x.*^answers: \d+ checked against the direct "
    r"answer's text, 0 differ\nrecords: (\d+) gateway requests, \1 answered with a request id, "
    r"\1 records \{'ok': \1\}, 0 missing PASS$",
    # Every kind of record written with and without the break search (the script's last row).
    "cache_break_settle.py": r"(?m)^broken\s+affinity\s+[\d.]+\s+[\d.]+\s+-?\d+$",
    "redaction.py": r"redaction: typical [\d.]+ MB/s per core .*, p99 [\d.]+ ms per 20 KB prompt .*; "
    r"dense [\d.]+ MB/s, p99 [\d.]+ ms",
}

# Arguments beside `--smoke`.
ARGS = {"gateway_peers.py": ["--peers"]}


@dataclass(frozen=True)
class SmokeRun:
    returncode: int | None  # None: killed after TIMEOUT
    output: str


def _smoke_run(script: str, env: dict[str, str]) -> SmokeRun:
    """One benchmark at its smoke size, its TIMEOUT counted from its own start."""
    try:
        done = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / script), "--smoke", *ARGS.get(script, [])],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=TIMEOUTS.get(script, TIMEOUT),
            check=False,
        )
    except subprocess.TimeoutExpired as timed_out:
        output = timed_out.output or ""
        return SmokeRun(None, output if isinstance(output, str) else output.decode(errors="replace"))
    return SmokeRun(done.returncode, done.stdout)


@pytest.fixture(scope="module")
def smoke_runs(
    request: pytest.FixtureRequest, django_db_setup: None
) -> Iterator[dict[str, Future[SmokeRun]]]:
    """Start the benchmarks at their smoke size, as many at once as there are cores; each test
    waits for its own. All eight at once made each wait on the others' start-ups (migrations,
    app servers, the engine's replicas): beside the suite's parallel workers, the slowest
    overran its timeout while doing nothing wrong. A benchmark that migrates a new SQLite
    database starts from the run's migrated copy when there is one (`benchmarks/schema.py`):
    nine of them migrated from empty, ~10 s of CPU each."""
    # The benchmarks choose their own settings and databases: not the suite's.
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", TEMPLATE_VARIABLE}
    } | {"PYTHONUNBUFFERED": "1"}  # a run that overran shows how far it got
    template = sqlite_schema_copy()
    if template is not None:
        env[TEMPLATE_VARIABLE] = str(template)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        runs = {script: pool.submit(_smoke_run, script, env) for script in _selected(request)}
        try:
            yield runs
        finally:
            for run in runs.values():
                run.cancel()


def _selected(request: pytest.FixtureRequest) -> list[str]:
    """The scripts whose tests this run holds (`-k` may pick a few), in FIGURES's order: a
    script started for nobody held the module's teardown until it ended."""
    chosen = {
        item.callspec.params["script"]
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.module is request.module
    }
    return [script for script in FIGURES if script in chosen]


@pytest.mark.timeout(max(TIMEOUTS.values()) + 60)  # waits for its run, whose own timeout counts
@pytest.mark.parametrize("script", list(FIGURES))
def test_the_benchmark_runs_at_its_smoke_size_and_prints_its_figures(
    smoke_runs: dict[str, Future[SmokeRun]], script: str
) -> None:
    run = smoke_runs[script].result()
    if run.returncode is None:
        pytest.fail(f"{script} --smoke took over {TIMEOUTS.get(script, TIMEOUT)} s:\n{run.output[-3000:]}")

    tail = run.output[-3000:]
    assert run.returncode == 0, f"{script} --smoke exited with {run.returncode}:\n{tail}"
    assert re.search(FIGURES[script], run.output), f"{script} --smoke printed no figures:\n{tail}"
