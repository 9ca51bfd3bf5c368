"""A replica's start-up self-test: generate a few tokens of a fixed prompt before taking work.

Loading a model exercises little of llama.cpp's compute kernels; the first prompt
evaluation does. A build whose kernels do not run on this CPU (a `-march=native` wheel
from another machine, or ggml's AMX kernels, which crash on some AMX CPUs) loads fine and
then dies on every answer. Running one tiny generation first turns that into a clear
start-up failure instead of an app that prints its URL and cannot answer.

`ENGINE_SELF_TEST_FAULT=segfault` (tests only) makes the self-test die the way such a build
does, so the engine's handling of it can be tested on any machine.
"""

from __future__ import annotations

import os
import signal
import time

from playground.engine.generator import Generator
from playground.engine.protocol import Event, Failed, Finished, GenerationSpec, SelfTest

TOKENS = 4
PROMPT = [{"role": "user", "content": "Count from one to ten."}]
FAULT_VARIABLE = "ENGINE_SELF_TEST_FAULT"

# Shown by the engine when a replica cannot pass the self-test.
LIKELY_CAUSE = (
    "Likely cause: llama.cpp (llama-cpp-python) was compiled for CPU features that do not work here, "
    "e.g. a -march=native build from another machine or pip's wheel cache, or one that uses ggml's "
    "AMX kernels. Fix: rebuild the portable wheel with `rm -rf .venv var/wheels && make run` "
    "(without LLAMA_NATIVE=1). If a custom --model is set, also check that the GGUF file is whole."
)


class SelfTestError(Exception):
    pass


def run_self_test(generator: Generator) -> SelfTest:
    """Generate `TOKENS` greedy tokens of `PROMPT`; raise `SelfTestError` if that fails."""
    if os.environ.get(FAULT_VARIABLE) == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    events: list[Event] = []
    started = time.perf_counter()
    spec = GenerationSpec(messages=PROMPT, max_tokens=TOKENS, temperature=0.0, cache_scope="self-test")
    generator.run(spec, events.append, lambda: False)
    seconds = time.perf_counter() - started
    generator.forget()  # the self-test's KV is nobody's cache
    generator.cache.clear()
    end = events[-1] if events else None
    if isinstance(end, Failed):
        raise SelfTestError(end.message)
    if not isinstance(end, Finished):
        raise SelfTestError("the generation ended without a result")
    return SelfTest(tokens=end.completion_tokens, seconds=round(seconds, 3))
