"""Experiment throughput on the embedded engine: an experiment against the batch queue alone (issue 39).

In one run, on one fresh engine (default replicas), runs alternate (a b, b a, a b, ...):
(a) the batch queue alone: one batch of N items (each of N/2 prompts twice, once at each
    target's temperature), timed from the draft (check and store the lines) to its last record;
(b) an experiment of 2 preset-version targets x N/2 dataset items: the same N requests (the
    same system prompt, user prompts, max_tokens and temperatures, on the same engine and
    model), timed from `experiment_create` (the drafts and the pre-flight) to its last verdict
    stored; its checks are `contains` and `json_schema` (answers of a few tokens are rarely
    JSON: that check mostly fails, and is run all the same).
With `--judge`, (c) the same experiment with an LLM judge on the engine as well, timed to the
last judge verdict, reported apart (its calls are extra work for the engine, not the queue's).

Each run has its own prompts (the engine keeps finished prompts in its prefix cache: a run
repeating another's would be served partly from it, see batch_throughput.py). The steps run
in this process as one worker runs them, one task at a time: each batch's chain step when due
(sleeping until the earliest), and after each step Celery's `task_postrun` is sent as the
worker sends it, so the experiment's scoring (`evals.tasks.after_batch_step`) queues its task;
queued tasks run in order between the steps (the harness stands in for the broker). The
figures are the machinery's: answers of `--max-tokens` (8) tokens keep the engine's share
small. The last line is `experiment throughput: <items/s> items/s, <ratio>x of the batch queue's
<items/s> items/s` (medians over the runs).

    .venv/bin/python benchmarks/experiment_throughput.py [--items 2000] [--runs 2] [--judge]
    .venv/bin/python benchmarks/experiment_throughput.py --smoke   # seconds: the test suite runs this
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.batch_throughput import owner_and_connection, setup_django  # noqa: E402

SYSTEM_PROMPT = "Reply briefly."
TEMPERATURES = (0.0, 0.7)  # one per target: two versions of one preset
SCHEMA = {"type": "object", "required": ["word"]}
SMOKE = {"items": 4, "runs": 1, "replicas": 2, "judge": True}  # every path, no figure to trust


def prompt(i: int, run: str) -> str:
    return f"Run {run}: reply with one word about item {i}."


@dataclass(frozen=True)
class Figures:
    kind: str
    items: int
    seconds: float
    app_cpu: float  # this process's CPU seconds (the app's; the engine is another process)
    records: int
    verdicts: int

    @property
    def rate(self) -> float:
        return self.items / self.seconds


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- the worker, in this process ---------------------------------------------------------------


@contextmanager
def _tasks_queued_here(queue: deque[Callable[[], None]]) -> Iterator[None]:
    """The scoring task's `.delay` puts it on this process's queue instead of the broker's."""
    from playground.evals import tasks

    def delay(target_id: int) -> None:
        queue.append(lambda: tasks.experiment_target_score.run(target_id))

    with mock.patch.object(tasks.experiment_target_score, "delay", delay):
        yield


def run_chains(batch_ids: list[int]) -> None:
    """Every batch's chain to its end, one task at a time as a worker runs them: a step when one
    is due, else a queued task, else a sleep until the next step is due."""
    from celery.signals import task_postrun

    from playground.batches.models import Batch
    from playground.batches.services.step import batch_step_run
    from playground.batches.tasks import batch_step

    tokens = dict(Batch.objects.filter(pk__in=batch_ids).values_list("pk", "chain_token"))
    due = dict.fromkeys(batch_ids, time.monotonic())
    queued: deque[Callable[[], None]] = deque()
    with _tasks_queued_here(queued):
        while due or queued:
            pk = min(due, key=due.__getitem__) if due else None
            if pk is None or (queued and due[pk] > time.monotonic()):
                queued.popleft()()
                continue
            time.sleep(max(0.0, due[pk] - time.monotonic()))
            args = (pk, tokens[pk])
            countdown = batch_step_run(batch_id=pk, token=tokens[pk])
            task_postrun.send(
                sender=batch_step,
                task_id="",
                task=batch_step,
                args=args,
                kwargs={},
                retval=None,
                state="SUCCESS",
            )
            if countdown is None:
                del due[pk]
            else:
                due[pk] = time.monotonic() + countdown


# --- (a) the batch queue alone -----------------------------------------------------------------


def batch_alone(
    user: Any, connection: Any, model_id: str, max_tokens: int, count: int, run: str, workdir: Path
) -> Figures:
    from playground.batches.models import BatchItem
    from playground.batches.services.actions import batch_confirm
    from playground.batches.services.drafts import BatchInput, batch_draft_create

    path = workdir / f"{run}.jsonl"
    with path.open("w") as out:
        for temperature in TEMPERATURES:
            for i in range(count // 2):
                line = {
                    "messages": [
                        {"role": "system", "content": SYSTEM_PROMPT},
                        {"role": "user", "content": prompt(i, run)},
                    ],
                    "max_tokens": max_tokens,
                    "temperature": temperature,
                }
                out.write(json.dumps(line) + "\n")
    started, cpu = time.perf_counter(), _cpu_seconds()
    with path.open("rb") as stream:
        draft = batch_draft_create(
            user=user,
            connection_id=connection.pk,
            model_id=model_id,
            source=BatchInput(kind="jsonl", stream=stream),
        )
    batch = batch_confirm(user=user, batch_id=draft.pk)
    run_chains([batch.pk])
    seconds, app_cpu = time.perf_counter() - started, _cpu_seconds() - cpu
    records = BatchItem.objects.filter(batch=batch, usage_record__isnull=False).count()
    return Figures("batch queue", count, seconds, app_cpu, records, 0)


# --- (b) the experiment ------------------------------------------------------------------------


def preset_versions(user: Any, connection: Any, model_id: str, max_tokens: int) -> list[int]:
    from playground.presets.services import connection_ref, preset_version_save
    from playground.presets.setup import PresetSetup

    ids: list[int] = []
    for temperature in TEMPERATURES:
        setup = PresetSetup(
            connection=connection_ref(connection),
            model_id=model_id,
            system_prompt=SYSTEM_PROMPT,
            variables=[],
            parameters={"max_tokens": max_tokens, "temperature": temperature},
        )
        preset_id = _preset_of(ids[0]) if ids else None
        version = preset_version_save(
            user=user, team_id=connection.team_id, setup=setup, preset_id=preset_id, name="Bench"
        )
        ids.append(version.pk)
    return ids


def _preset_of(version_id: int) -> int:
    from playground.presets.models import PresetVersion

    return PresetVersion.objects.values_list("preset_id", flat=True).get(pk=version_id)


def experiment(
    user: Any, versions: list[int], count: int, run: str, checks: list[dict[str, Any]], kind: str
) -> Figures:
    from playground.batches.models import BatchItem
    from playground.evals.models import CheckResult, ExperimentTarget
    from playground.evals.services.datasets import dataset_create, dataset_items_add
    from playground.evals.services.experiments import experiment_create, experiment_start
    from playground.evals.services.scoring import target_unscored
    from playground.evals.uploads import ItemFields

    team_id = _team_of(user)
    dataset = dataset_create(user=user, team_id=team_id, name=f"Bench {run}")
    items = [ItemFields(input=prompt(i, run), expected="item") for i in range(count // len(versions))]
    dataset_items_add(user=user, dataset_id=dataset.pk, items=items, change="benchmark")
    started, cpu = time.perf_counter(), _cpu_seconds()
    made = experiment_create(user=user, dataset_id=dataset.pk, preset_version_ids=versions, checks=checks)
    experiment_start(user=user, experiment_id=made.pk)
    targets = list(ExperimentTarget.objects.filter(experiment=made))
    run_chains([target.batch_id for target in targets if target.batch_id is not None])
    seconds, app_cpu = time.perf_counter() - started, _cpu_seconds() - cpu
    unscored = [target.pk for target in targets if target_unscored(target_id=target.pk)]
    assert not unscored, f"targets {unscored} were left with answers unscored"
    records = BatchItem.objects.filter(
        batch__experiment_target__experiment=made, usage_record__isnull=False
    ).count()
    verdicts = CheckResult.objects.filter(target__experiment=made, judged_at__isnull=False).count()
    assert verdicts == count * len(checks), f"{verdicts} verdicts for {count} answers x {len(checks)} checks"
    return Figures(kind, count, seconds, app_cpu, records, verdicts)


def _team_of(user: Any) -> int:
    from playground.accounts.models import Membership

    return Membership.objects.values_list("team_id", flat=True).get(user=user)


def checks(judge_connection: Any, model_id: str, *, judge: bool) -> list[dict[str, Any]]:
    fixed: list[dict[str, Any]] = [
        {"kind": "contains", "ignore_case": True},
        {"kind": "json_schema", "schema": SCHEMA},
    ]
    if not judge:
        return fixed
    prompt_text = "Is {{output}} a fair one-word answer to {{input}}?"
    return [
        *fixed,
        {"kind": "judge", "prompt": prompt_text, "connection": judge_connection.pk, "model": model_id},
    ]


# --- the run -----------------------------------------------------------------------------------


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--items", type=int, default=2000, help="items per run, in all (the experiment's: 2 x N/2)"
    )
    parser.add_argument("--runs", type=int, default=2, help="runs of each, alternating")
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--judge", action="store_true", help="also an experiment with an LLM judge, apart")
    parser.add_argument("--replicas", type=int, default=0, help="engine replicas (default: the engine's)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run of every path (seconds)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    count = args.items - args.items % 2

    from playground.engine.config import DEFAULT_REPLICAS
    from tests.support.engine import start_engine

    print(f"load average before: {_load()}")
    rows: list[Figures] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "engine").mkdir()
        engine = start_engine(workdir / "engine", replicas=args.replicas or DEFAULT_REPLICAS)
        try:
            setup_django(workdir / "app", engine.url, engine.token)
            user, connection = owner_and_connection()
            versions = preset_versions(user, connection, engine.model_id, args.max_tokens)
            fixed = checks(connection, engine.model_id, judge=False)
            for number in range(args.runs):
                order = ("a", "b") if number % 2 == 0 else ("b", "a")
                for kind in order:
                    run = f"{kind}{number}"
                    if kind == "a":
                        rows.append(
                            batch_alone(
                                user, connection, engine.model_id, args.max_tokens, count, run, workdir
                            )
                        )
                    else:
                        rows.append(experiment(user, versions, count, run, fixed, "experiment"))
                    print(_row(rows[-1]), flush=True)
            if args.judge:
                with_judge = checks(connection, engine.model_id, judge=True)
                rows.append(experiment(user, versions, count, "judged", with_judge, "experiment + judge"))
                print(_row(rows[-1]), flush=True)
        finally:
            engine.stop()
    print(f"load average after: {_load()}")
    _summary(rows, count, args.max_tokens)


def _row(figures: Figures) -> str:
    return (
        f"{figures.kind:<20} {figures.items:>6,} items {figures.seconds:>7.1f} s "
        f"{figures.rate:>7.2f} items/s "
        f"app CPU {figures.app_cpu:>6.1f} s ({1000 * figures.app_cpu / figures.items:.0f} ms/item) "
        f"records {figures.records:,} verdicts {figures.verdicts:,}"
    )


def _summary(rows: list[Figures], count: int, max_tokens: int) -> None:
    queue = [row.rate for row in rows if row.kind == "batch queue"]
    runs = [row.rate for row in rows if row.kind == "experiment"]
    for row in rows:
        assert row.records == count, f"{row.kind}: {row.records} records for {count} items"
    ratios = [b / a for a, b in zip(queue, runs, strict=True)]
    print(
        f"answers of {max_tokens} tokens at most: the figures are the machinery's more than the engine's; "
        f"ratio per pair of runs: {', '.join(f'{r:.2f}' for r in ratios)}"
    )
    queue_rate, run_rate = statistics.median(queue), statistics.median(runs)
    print(
        f"experiment throughput: {run_rate:.2f} items/s, {run_rate / queue_rate:.2f}x of the batch queue's "
        f"{queue_rate:.2f} items/s"
    )


if __name__ == "__main__":
    main()
