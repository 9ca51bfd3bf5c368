"""A replica process: loads the model once, passes its self-test, then answers jobs sent over its pipe.

It runs one job at a time; the front end keeps the queue, so a crash loses at most the
job in flight. Between tokens it polls the pipe for a cancel. When the front end goes
away the pipe closes and the replica exits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import llama_cpp

from playground.engine.generator import Generator
from playground.engine.prefix_cache import PrefixCache
from playground.engine.prompts import PromptTokenizer
from playground.engine.protocol import CancelJob, Fatal, JobEvent, Loaded, Ready, RunJob
from playground.engine.self_test import LIKELY_CAUSE, SelfTestError, run_self_test
from playground.engine.templates import template_source

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReplicaSettings:
    model_path: Path
    chat_format: str
    context_size: int
    threads: int
    prefix_cache_bytes: int
    log_level: str


def replica_main(conn: Connection, settings: ReplicaSettings) -> None:
    """Entry point of the spawned process."""
    # Ctrl-C and a stop sent to the whole process group (honcho under `make run`, systemd) reach
    # us as well as the front end. The front end stops us: dying first, we would be restarted.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s replica %(name)s: %(message)s"
    )
    # The front end may be gone (stopped while we started, or killed): then no one is left to answer.
    with contextlib.suppress(BrokenPipeError, EOFError):
        _serve(conn, settings)


def _serve(conn: Connection, settings: ReplicaSettings) -> None:
    try:
        generator = _load(settings)
    except Exception as exc:
        logger.exception("could not load the model")
        conn.send(Fatal(f"The model could not be loaded: {exc}"))
        return
    conn.send(Loaded())
    try:
        self_test = run_self_test(generator)
    except SelfTestError as exc:
        conn.send(Fatal(f"The start-up self-test failed: {exc}. {LIKELY_CAUSE}"))
        return
    logger.info("self-test passed: %d tokens in %.2f s", self_test.tokens, self_test.seconds)
    conn.send(Ready(pid=os.getpid(), context_size=generator.n_ctx, self_test=self_test))
    while True:
        message = conn.recv()
        if isinstance(message, RunJob):
            _run(conn, generator, message)
        # A CancelJob for a job that has already finished needs nothing.


def _load(settings: ReplicaSettings) -> Generator:
    llm = llama_cpp.Llama(
        model_path=str(settings.model_path),
        n_ctx=settings.context_size,
        n_batch=512,
        n_threads=settings.threads,
        n_threads_batch=settings.threads,
        # Full-size sliding-window KV (Gemma 3): without it a trimmed KV cannot be reused.
        swa_full=True,
        verbose=False,
    )
    prompts = PromptTokenizer(llm, llm.model, template_source(settings.chat_format, llm.metadata))
    return Generator(llm, prompts, PrefixCache(settings.prefix_cache_bytes))


def _run(conn: Connection, generator: Generator, job: RunJob) -> None:
    cancelled = False

    def is_cancelled() -> bool:
        nonlocal cancelled
        while not cancelled and conn.poll():
            message = conn.recv()  # EOFError here ends the process (replica_main), as it should
            cancelled = isinstance(message, CancelJob) and message.job_id == job.job_id
        return cancelled

    generator.run(job.spec, lambda event: conn.send(JobEvent(job.job_id, event)), is_cancelled)
