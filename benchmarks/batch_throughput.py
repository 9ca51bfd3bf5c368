"""Batch throughput on the embedded engine: the queue path against the engine's own capacity.

In one run, on one fresh engine (default replicas):
1. direct capacity: the same short items sent straight to `/ai/run` (non-streaming), at
   several concurrency levels; the best items/s counts;
2. the queue path: the items as one batch through the app (validation, submissions under
   10 MB, `?queueRequest=true`, polling with backoff, each result metered and recorded),
   the steps run in this process exactly as the worker runs them (sleeping until each
   step's countdown instead of the broker holding it), timed from confirm to the last record;
3. a 50,000-item submission (check every line, store the items, confirm): its time, and
   the peak RSS of a process doing it for 5,000 and for 50,000 items (memory flat in the
   item count means the two are close).

The app runs on a SQLite file in a temporary data folder. The last line is
`batch throughput: <items/s> items/s, <ratio>x of direct capacity`.

    .venv/bin/python benchmarks/batch_throughput.py [--items 1000] [--big 50000] [--replicas 5]
    .venv/bin/python benchmarks/batch_throughput.py --smoke   # seconds: the test suite runs this
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MAX_TOKENS = 8
SMOKE = {"items": 6, "big": 200, "replicas": 2}  # every path, no figure to trust


def item(i: int, run: str) -> dict[str, Any]:
    """Item `i` of one run. Each run has its own prompts: the engine keeps finished prompts in its
    prefix cache, so a run repeating another's would be served partly from it (measured: direct
    at 10 in flight after the 5-in-flight run gave 11.5 items/s on its repeats, 9.7-9.9 on new
    prompts), and the queue path, under the team's own account, could not be."""
    return {
        "messages": [{"role": "user", "content": f"Run {run}: reply with one word about item {i}."}],
        "max_tokens": MAX_TOKENS,
    }


def setup_django(data_dir: Path, engine_url: str = "", token: str = "") -> None:
    os.environ.update(
        DJANGO_SETTINGS_MODULE="playground.settings",
        PLAYGROUND_DATA_DIR=str(data_dir),
        LOG_LEVEL="WARNING",
        BATCH_POLL_FIRST_SECONDS=os.environ.get("BATCH_POLL_FIRST_SECONDS", "1"),
    )
    for key in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(key, None)
    if engine_url:
        os.environ["ENGINE_URL"] = engine_url
        os.environ["ENGINE_API_TOKEN"] = token
    import django

    django.setup()
    from benchmarks.schema import database_migrated

    database_migrated()


def owner_and_connection() -> tuple[Any, Any]:
    from django.contrib.auth.models import User

    from playground.accounts.models import Membership, Role, Team
    from playground.providers.services import connection_engine_ensure

    team = Team.objects.create(name="Bench", slug=f"bench-{time.time_ns()}")
    user = User.objects.create_user(f"bench-{time.time_ns()}", password="x" * 12)
    Membership.objects.create(team=team, user=user, role=Role.OWNER)
    return user, connection_engine_ensure(team=team)


def submit(user: Any, connection: Any, path: Path, model_id: str) -> tuple[Any, float, float]:
    """(batch, seconds to check and store, seconds to confirm)."""
    from playground.batches.services.actions import batch_confirm
    from playground.batches.services.drafts import BatchInput, batch_draft_create

    started = time.perf_counter()
    with path.open("rb") as stream:
        draft = batch_draft_create(
            user=user,
            connection_id=connection.pk,
            model_id=model_id,
            source=BatchInput(kind="jsonl", stream=stream),
        )
    checked = time.perf_counter()
    batch = batch_confirm(user=user, batch_id=draft.pk)
    return batch, checked - started, time.perf_counter() - checked


def write_jsonl(path: Path, count: int, run: str) -> None:
    with path.open("w") as out:
        for i in range(count):
            out.write(json.dumps({**item(i, run), "external_reference": f"ref-{i}"}) + "\n")


# --- 1. direct capacity ----------------------------------------------------------------------


async def direct_rate(engine: Any, count: int, concurrency: int, run: str) -> float:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            i = queue.get_nowait()
            response = await client.post(
                engine.run_url(), json=item(i, run), headers=engine.headers, timeout=300
            )
            response.raise_for_status()

    started = time.perf_counter()
    async with httpx.AsyncClient() as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return count / (time.perf_counter() - started)


# --- 2. the queue path -----------------------------------------------------------------------


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def queue_rate(engine: Any, count: int, workdir: Path) -> tuple[float, dict[str, float]]:
    """Items/s from confirm to the last record, and the item states, the records, the run's
    seconds and the app's own CPU seconds in them (taken from the engine's cores)."""
    from playground.batches.models import Batch
    from playground.batches.services.step import batch_step_run
    from playground.usage.models import UsageRecord

    user, connection = owner_and_connection()
    path = workdir / "items.jsonl"
    write_jsonl(path, count, "queue")
    started, cpu_started = time.perf_counter(), _cpu_seconds()
    batch, _, _ = submit(user, connection, path, engine.model_id)
    batch.refresh_from_db()
    countdown: float | None = 0.0
    while countdown is not None:
        time.sleep(countdown)
        countdown = batch_step_run(batch_id=batch.pk, token=batch.chain_token)
    elapsed, app_cpu = time.perf_counter() - started, _cpu_seconds() - cpu_started
    batch = Batch.objects.get(pk=batch.pk)
    states: dict[str, float] = {
        state: batch.items.filter(state=state).count() for state in ("done", "failed", "pending", "submitted")
    }
    states["records"] = UsageRecord.objects.filter(path="batch", source__startswith="batch-item:").count()
    states["seconds"] = round(elapsed, 1)
    states["app_cpu_seconds"] = round(app_cpu, 1)
    return count / elapsed, states


# --- 3. a big submission -------------------------------------------------------------------------


def big_submission(count: int, workdir: Path) -> None:
    """Runs in its own process: prints JSON with the times and this process's peak RSS."""
    setup_django(workdir / f"data-{count}")
    user, connection = owner_and_connection()
    path = workdir / f"big-{count}.jsonl"
    write_jsonl(path, count, "big")
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _, check_seconds, confirm_seconds = submit(user, connection, path, "@local/smollm2-135m-instruct")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "check": check_seconds,
                "confirm": confirm_seconds,
                "peak_mb": peak / 1024,
                "before_mb": baseline / 1024,
            }
        )
    )


def measure_big(count: int, workdir: Path) -> dict[str, float]:
    output = subprocess.run(
        [sys.executable, __file__, "--big-only", str(count), "--workdir", str(workdir)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--big", type=int, default=50_000)
    parser.add_argument("--replicas", type=int, default=0, help="engine replicas (default: the engine's)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run of every path (seconds)")
    parser.add_argument("--big-only", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    if args.big_only:
        big_submission(args.big_only, Path(args.workdir))
        return

    from playground.engine.config import DEFAULT_REPLICAS
    from tests.support.engine import start_engine

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for count in (args.big // 10, args.big):
            figures = measure_big(count, workdir)
            print(
                f"submission of {count:,} items: check+store {figures['check']:.1f} s, "
                f"confirm {figures['confirm']:.2f} s, peak RSS {figures['peak_mb']:.0f} MB "
                f"(before it {figures['before_mb']:.0f} MB)"
            )

        (workdir / "engine").mkdir()
        replicas = args.replicas or DEFAULT_REPLICAS
        engine = start_engine(workdir / "engine", replicas=replicas)
        try:
            # Warms every replica.
            asyncio.run(direct_rate(engine, 2 * replicas, replicas, "warm-up"))
            rates = {}
            for concurrency in (replicas, 2 * replicas):
                rates[concurrency] = asyncio.run(
                    direct_rate(engine, args.items, concurrency, f"direct-{concurrency}")
                )
                print(f"direct, {concurrency} in flight: {rates[concurrency]:.2f} items/s")
            best = max(rates.values())
            setup_django(workdir / "app", engine.url, engine.token)
            rate, states = queue_rate(engine, args.items, workdir)
            print(f"queue path: {args.items:,} items, {states}")
        finally:
            engine.stop()
    print(f"batch throughput: {rate:.2f} items/s, {rate / best:.2f}x of direct capacity")


if __name__ == "__main__":
    main()
