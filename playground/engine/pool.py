"""The replica pool: spawns replica processes, routes jobs to them, restarts the dead ones.

Every replica serves one model, and a job goes to a replica of the model it names; replica
indexes are unique across models (the `x-engine-replica` header names one). Each replica has
a queue of interactive jobs kept here, in the front end, and a driver task that hands it one
job at a time. When a replica has no interactive job it pulls an item of its model from the
durable batch queue, so interactive calls always come first. A reader thread per process
turns pipe messages into job events on the event loop; when the pipe reports end-of-file the
process is gone: its job in flight gets an error (a batch item goes back in the queue), its
waiting jobs move to live replicas of the same model, and it is restarted.

A replica is ready only once its start-up self-test has generated a few tokens. If one
cannot get there while the engine starts, `start` raises `EngineStartupError` with what
went wrong and how to fix it, and the engine exits instead of serving nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from playground.engine.batch_queue import BatchQueue, QueuedItem
from playground.engine.errors import EngineError, out_of_capacity, replica_crashed
from playground.engine.jobs import Job, collect
from playground.engine.metrics import ReplicaWork
from playground.engine.protocol import (
    CancelJob,
    Failed,
    Fatal,
    Finished,
    GenerationSpec,
    JobEvent,
    Loaded,
    Ready,
    RunJob,
    SelfTest,
)
from playground.engine.replica import ReplicaSettings, replica_main
from playground.engine.routing import least_loaded_pick, rendezvous_pick, round_robin_pick
from playground.engine.self_test import LIKELY_CAUSE, PROMPT, TOKENS
from playground.engine.shapes import Reply, error_envelope

logger = logging.getLogger(__name__)

QUICK_EXIT_SECONDS = 30.0  # a replica dying sooner than this after starting backs off before restarting


class EngineStartupError(Exception):
    """A replica could not load the model or pass its self-test while the engine started."""


def _exit_description(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            pass
    return f"exit code {exitcode}"


@dataclass(frozen=True)
class ModelReplicas:
    """A model and how many replica processes serve it."""

    model_id: str
    settings: ReplicaSettings
    count: int


class Replica:
    def __init__(self, index: int, model_id: str, settings: ReplicaSettings) -> None:
        self.index = index
        self.model_id = model_id
        self.settings = settings
        self.process: BaseProcess | None = None
        self.conn: Connection | None = None
        self.ready = False
        self.loaded = False  # the model is in memory (the self-test may still be running)
        self.self_test: SelfTest | None = None
        self.context_size = 0  # the context window the model was loaded with (0: not loaded yet)
        self.restarts = 0
        self.work = ReplicaWork()  # what it did, for the metrics
        self.started_at = 0.0
        self.quick_exits = 0
        self.pending: deque[Job] = deque()
        self.current: Job | None = None
        self.wakeup = asyncio.Event()

    @property
    def load(self) -> int:
        return len(self.pending) + (self.current is not None)


class ReplicaPool:
    def __init__(
        self,
        models: Sequence[ModelReplicas],
        *,
        queue: BatchQueue,
        batch_spec: Callable[[QueuedItem], GenerationSpec],
        balance: str = "round-robin",  # or least-loaded: see `routing`
    ) -> None:
        self._context = multiprocessing.get_context("spawn")
        self.replicas = [
            Replica(index, model.model_id, model.settings)
            for index, model in enumerate(model for model in models for _ in range(model.count))
        ]
        self._queue = queue
        self._batch_spec = batch_spec
        # Models whose replicas may find queued items (at start: items left from an earlier run).
        self._batch_waiting = {model.model_id for model in models}
        self._balance = balance
        self._turns = {model.model_id: -1 for model in models}  # per model: see _route
        self._stopping = False
        self._fatal = ""
        self._started = False
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- lifecycle ---

    async def start(self) -> None:
        """Spawn every replica and wait until all have passed their self-test (or one cannot)."""
        self._loop = asyncio.get_running_loop()
        for replica in self.replicas:
            self._spawn(replica)
        while not all(replica.ready for replica in self.replicas):
            if self._fatal:
                raise EngineStartupError(self._fatal)
            await asyncio.sleep(0.05)
        self._started = True
        self._tasks = [asyncio.create_task(self._drive(replica)) for replica in self.replicas]

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        processes = [replica.process for replica in self.replicas if replica.process is not None]
        for process in processes:
            process.kill()  # replicas ignore SIGTERM (see replica_main) and hold nothing to save
        await asyncio.to_thread(_reap, processes)
        stopped = EngineError(replica_crashed().code, 503, "The engine is shutting down.")
        for replica in self.replicas:
            for job in [*replica.pending, *([replica.current] if replica.current else [])]:
                job.deliver(Failed(stopped.code, stopped.status, stopped.message))

    # --- routing ---

    def submit(
        self, spec: GenerationSpec, *, model: str, affinity: str = "", reject_if_busy: bool = False
    ) -> Job:
        replica = self._route(model, affinity)
        if reject_if_busy and replica.load:
            raise out_of_capacity()
        job = Job(spec)
        job.on_cancel = self._cancel
        self._enqueue(replica, job)
        return job

    def notify_batch(self, model: str) -> None:
        self._batch_waiting.add(model)
        for replica in self.replicas:
            if replica.model_id == model:
                replica.wakeup.set()

    def snapshot(self) -> list[dict[str, Any]]:
        return [
            {
                "index": replica.index,
                "model": replica.model_id,
                "pid": replica.process.pid if replica.process else None,
                "ready": replica.ready,
                "busy": replica.current is not None,
                "load": replica.load,
                "restarts": replica.restarts,
                "self_test": _self_test_report(replica),
            }
            for replica in self.replicas
        ]

    def context_windows(self) -> dict[str, int]:
        """Each model's context window in tokens, as its replicas loaded it (`n_ctx`)."""
        return {replica.model_id: replica.context_size for replica in self.replicas if replica.context_size}

    def _route(self, model: str, affinity: str) -> Replica:
        own = [replica for replica in self.replicas if replica.model_id == model]
        live = [replica for replica in own if replica.ready] or own
        if affinity:
            return self.replicas[rendezvous_pick(affinity, [replica.index for replica in live])]
        if self._balance == "round-robin":  # the turn is the replica last given a job
            picked = round_robin_pick(
                self._turns[model], [replica.index for replica in live], len(self.replicas)
            )
            self._turns[model] = picked
            return self.replicas[picked]
        self._turns[model] += 1  # the turn rotates the ties
        return self.replicas[
            least_loaded_pick([(replica.index, replica.load) for replica in live], self._turns[model])
        ]

    def _enqueue(self, replica: Replica, job: Job) -> None:
        job.replica_index = replica.index
        replica.pending.append(job)
        replica.wakeup.set()

    def _cancel(self, job: Job) -> None:
        replica = self.replicas[job.replica_index] if job.replica_index is not None else None
        if replica is None:
            return
        if job in replica.pending:
            replica.pending.remove(job)
            job.deliver(Finished("cancelled", 0, 0, 0))
        elif replica.current is job and replica.conn is not None:
            with contextlib.suppress(OSError):  # the replica is dying; its exit fails the job
                replica.conn.send(CancelJob(job.id))

    # --- driving a replica ---

    async def _drive(self, replica: Replica) -> None:
        while True:
            job = await self._next_job(replica)
            replica.current = job
            job.replica_index = replica.index
            try:
                assert replica.conn is not None
                replica.conn.send(RunJob(job.id, job.spec))
            except OSError:
                pass  # the process just died; _on_exit fails the job
            await job.done
            replica.current = None
            if job.batch_item is not None:
                await self._settle(job, job.batch_item)

    async def _next_job(self, replica: Replica) -> Job:
        while True:
            if replica.ready and replica.pending:
                return replica.pending.popleft()
            if replica.ready and replica.model_id in self._batch_waiting:
                item = await asyncio.to_thread(self._queue.claim, replica.model_id)
                if item is None:
                    self._batch_waiting.discard(replica.model_id)
                elif not replica.ready:
                    await asyncio.to_thread(self._queue.unclaim, item)
                elif (job := await self._batch_job(item)) is not None:
                    return job
                continue
            replica.wakeup.clear()
            await replica.wakeup.wait()

    async def _batch_job(self, item: QueuedItem) -> Job | None:
        try:
            spec = self._batch_spec(item)
        except EngineError as exc:
            await asyncio.to_thread(self._queue.complete, item, success=False, result=error_envelope(exc))
            return None
        return Job(spec, batch_item=item)

    async def _settle(self, job: Job, item: QueuedItem) -> None:
        if job.crashed and await asyncio.to_thread(self._queue.release, item):
            self.notify_batch(item.model)
            return
        outcome = await collect(job.events())
        if isinstance(outcome.end, Failed):
            await asyncio.to_thread(
                self._queue.complete, item, success=False, result=error_envelope(outcome.end)
            )
        else:
            result = Reply(model=item.model).completion(outcome.text, outcome.calls, outcome.end)
            await asyncio.to_thread(self._queue.complete, item, success=True, result=result)

    # --- processes ---

    def _spawn(self, replica: Replica) -> None:
        if self._stopping:
            return
        parent_end, child_end = self._context.Pipe()
        process = self._context.Process(
            target=replica_main,
            args=(child_end, replica.settings),
            name=f"engine-replica-{replica.index}",
            daemon=True,
        )
        process.start()
        child_end.close()
        replica.process, replica.conn = process, parent_end
        replica.loaded, replica.self_test = False, None
        replica.started_at = time.monotonic()
        logger.info("replica %d of %s starting (pid %s)", replica.index, replica.model_id, process.pid)
        threading.Thread(
            target=self._read,
            args=(replica, process, parent_end),
            name=f"replica-{replica.index}-reader",
            daemon=True,
        ).start()

    def _read(self, replica: Replica, process: BaseProcess, conn: Connection) -> None:
        """Reader thread: pipe messages -> the event loop, then report the process's exit."""
        assert self._loop is not None
        try:
            while True:
                message = conn.recv()
                self._loop.call_soon_threadsafe(self._on_message, replica, process, message)
        except (EOFError, OSError):
            pass
        process.join()
        with contextlib.suppress(RuntimeError):  # the event loop is closed: the engine is shutting down
            self._loop.call_soon_threadsafe(self._on_exit, replica, process)

    def _on_message(self, replica: Replica, process: BaseProcess, message: object) -> None:
        if process is not replica.process:
            return
        if isinstance(message, JobEvent):
            if replica.current is not None and replica.current.id == message.job_id:
                replica.current.deliver(message.event)
                replica.work.observe(message.event)
        elif isinstance(message, Loaded):
            replica.loaded = True
        elif isinstance(message, Ready):
            replica.ready, replica.self_test = True, message.self_test
            replica.context_size = message.context_size
            logger.info(
                "replica %d ready (pid %d, context %d tokens, self-test %d tokens in %.2f s)",
                replica.index,
                message.pid,
                message.context_size,
                message.self_test.tokens,
                message.self_test.seconds,
            )
            replica.wakeup.set()
        elif isinstance(message, Fatal):
            self._fatal = f"Replica {replica.index}: {message.message}"
            logger.error("replica %d: %s", replica.index, message.message)

    def _on_exit(self, replica: Replica, process: BaseProcess) -> None:
        if process is not replica.process:
            return
        replica.ready = False
        replica.process = None
        if replica.conn is not None:
            replica.conn.close()
            replica.conn = None
        if self._stopping:
            return
        if not self._started:
            self._fatal = self._fatal or self._startup_death(replica, process.exitcode)
            return
        logger.warning(
            "replica %d (pid %s) exited with code %s", replica.index, process.pid, process.exitcode
        )
        if replica.current is not None:
            replica.current.crashed = True
            crash = replica_crashed()
            replica.current.deliver(Failed(crash.code, crash.status, crash.message))
        live = [other for other in self.replicas if other.ready and other.model_id == replica.model_id]
        while replica.pending and live:
            target = min(live, key=lambda other: other.load)
            self._enqueue(target, replica.pending.popleft())
        replica.restarts += 1
        quick = time.monotonic() - replica.started_at < QUICK_EXIT_SECONDS
        replica.quick_exits = replica.quick_exits + 1 if quick else 0
        delay = min(30.0, 2.0 ** (replica.quick_exits - 1)) if replica.quick_exits > 1 else 0.0
        assert self._loop is not None
        self._loop.call_later(delay, self._spawn, replica)

    @staticmethod
    def _startup_death(replica: Replica, exitcode: int | None) -> str:
        how = _exit_description(exitcode)
        if not replica.loaded:
            return f"Replica {replica.index} died ({how}) while loading the model (out of memory?)."
        return (
            f"Replica {replica.index} crashed ({how}) during its start-up self-test, which generates "
            f"{TOKENS} tokens of the prompt {PROMPT[0]['content']!r}. {LIKELY_CAUSE}"
        )


def _self_test_report(replica: Replica) -> dict[str, Any]:
    if replica.self_test is None:
        return {"passed": False, "state": "loading" if not replica.loaded else "running"}
    return {"passed": True, "tokens": replica.self_test.tokens, "seconds": replica.self_test.seconds}


def _reap(processes: list[BaseProcess]) -> None:
    for process in processes:
        process.join()
