"""How much time the gateway adds to a request, and how many requests it carries with a record each.

A loopback upstream in its own process (raw asyncio on uvloop, speaking OpenAI chat
completions) answers after a fixed time to first token: a stream of steady chunks, then the
usage chunk (when asked for) and `[DONE]`; or, not streamed, the whole JSON answer after the
same wait. The app runs as `make run` serves it (the Procfile's uvicorn command, so uvloop
and httptools) on a fresh database with a team, an OpenAI-compatible connection to the
upstream, a catalogued priced model and an API key. The team, the key's creator and the key
each have a monthly budget and the key per-minute limits, all far from reached: every
request holds and settles three ledgers and counts against its limits, as in production.

At each concurrency C, streamed and not, C clients each send the same request twice at the
same moment, straight to the upstream and through the gateway: the two paths interleave in
one run on the same busy machine, C requests in flight through the gateway (2C at the
upstream). Time to first token (TTFT) is the time to the first chunk of a stream's body (the
upstream sends nothing before its first `data:` line), or to the first byte of a whole
answer's body; total, to its last byte. Added = the gateway's percentile minus the direct
one. The gateway's own `x-playground-overhead-ms` figures and its web process's CPU time per
request stand beside them. Then 64 clients in a closed loop send non-streamed requests
through the gateway alone for `--sustain` seconds (the sustained rate), and every answered
`x-playground-request-id` must have its usage record in the database.

Targets (issue 24), on a 2-core machine, both profiles: added TTFT p50 <= 2 ms and p99 <=
10 ms at concurrency 16; >= 300 non-streamed requests/s sustained with a record each; 0
records missing. The raw client and the upstream take their share of the two cores too.

Profiles: embedded (a SQLite file in a temporary folder, limits counted in memory) by
default; production with `--services`, or when DATABASE_URL or REDIS_URL is set: a database
`bench_gateway_<pid>` created on that PostgreSQL server (default the local one) and dropped
afterwards, and Redis (default db 12 of the local one).

    .venv/bin/python benchmarks/gateway_overhead.py [--concurrency 1 16 64] [--requests 600] [--sustain 20]
    .venv/bin/python benchmarks/gateway_overhead.py --services          # PostgreSQL + Redis
    .venv/bin/python benchmarks/gateway_overhead.py --services --workers 2   # two web processes
    .venv/bin/python benchmarks/gateway_overhead.py --py-spy web.txt    # py-spy's stacks of the web process
    .venv/bin/python benchmarks/gateway_overhead.py --smoke             # seconds: the test suite runs this

`--py-spy` needs py-spy on PATH (or in PY_SPY); it records the web process's threads into
the file as collapsed stacks, idle ones included (`py-spy record --format raw --threads --idle`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.gateway_harness import (  # noqa: E402  (needs the repo on sys.path)
    MODEL,
    Connection,
    Sample,
    add_upstream_arguments,
    app_environment,
    bench_database,
    check_records,
    choose_profile,
    cpu_seconds,
    first_error,
    free_port,
    http_request,
    loop_and_threads_cpu,
    p50_p99,
    prepare_app,
    start_upstream,
    stop,
    verdict,
    wait_for_port,
    web_command,
    web_pid,
)

SMOKE = {"concurrency": [1, 4], "requests": 8, "sustain": 2.0, "warm_up": 4}  # every path, no figure to trust
TTFT_TARGETS_MS = (16, 2.0, 10.0)  # at this concurrency: added TTFT p50, p99 at most
RATE_TARGET = 300.0  # non-streamed requests/s sustained, each with its record
SUSTAIN_CONCURRENCY = 64
ROUTED_TARGET = 0.10  # a routed request uses at most this much more web CPU than a plain one (issue 35)
ROUTED_ROUNDS = 4  # the plain and the routed closed loops take turns, each round sustain/ROUNDS long
# Three rules, as a team would write them: two that do not match these requests (a tag, a size)
# and one that does, a fallback whose first step is a weighted group.
ROUTED_POLICY = {
    "rules": [
        {"name": "extraction", "when": {"tags_any": ["extraction"]},
         "targets": [{"connection": "Loopback", "model": MODEL}]},
        {"name": "big", "when": {"prompt_tokens_above": 20000},
         "targets": [{"connection": "Loopback", "model": MODEL}]},
        {"name": "main", "strategy": "fallback", "targets": [
            {"strategy": "weighted", "targets": [
                {"connection": "Loopback", "model": MODEL, "weight": 3},
                {"connection": "Loopback", "model": "@cf/openai/gpt-oss-120b", "weight": 1}]},
            {"connection": "Loopback", "model": MODEL}]},
    ],
    "sticky_sessions": True,
}  # fmt: skip


@dataclass
class Target:
    """The same request, to the upstream directly and through the gateway."""

    upstream_port: int
    app_port: int
    secret: str
    routed_secret: str = ""  # a key that follows the team's routing policy

    def requests(self, *, stream: bool) -> tuple[bytes, bytes]:
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "Say a few words."}],
            "max_tokens": 64,
            "stream": stream,
        }
        direct = http_request(
            self.upstream_port, "/v1/chat/completions", body, {"authorization": "Bearer bench-token"}
        )
        gateway = http_request(
            self.app_port, "/v1/chat/completions", body, {"authorization": f"Bearer {self.secret}"}
        )
        return direct, gateway


@dataclass
class Level:
    concurrency: int
    stream: bool
    direct: list[Sample] = field(default_factory=list)
    gateway: list[Sample] = field(default_factory=list)
    web_cpu_s: tuple[float, float] = (0.0, 0.0)  # the event loop's, the other threads' (the ORM's)

    @property
    def mode(self) -> str:
        return "stream" if self.stream else "whole"


async def run_level(target: Target, level: Level, pairs: int) -> None:
    """`level.concurrency` clients; each sends its pairs (direct and gateway at once) one after another."""
    direct_request, gateway_request = target.requests(stream=level.stream)

    async def client(count: int) -> None:
        direct, gateway = Connection(target.upstream_port), Connection(target.app_port)
        try:
            for _ in range(count):
                a, b = await asyncio.gather(direct.send(direct_request), gateway.send(gateway_request))
                level.direct.append(a)
                level.gateway.append(b)
        finally:
            await direct.close()
            await gateway.close()

    share, extra = divmod(pairs, level.concurrency)
    await asyncio.gather(*(client(share + (i < extra)) for i in range(level.concurrency)))


async def run_sustained(target: Target, seconds: float, concurrency: int) -> tuple[list[Sample], float]:
    """A closed loop through the gateway alone: each client sends its next request when one ends."""
    _, gateway_request = target.requests(stream=False)
    samples: list[Sample] = []
    started = time.perf_counter()
    deadline = started + seconds

    async def client() -> None:
        connection = Connection(target.app_port)
        try:
            while time.perf_counter() < deadline:
                samples.append(await connection.send(gateway_request))
        finally:
            await connection.close()

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return samples, time.perf_counter() - started


class Busy:
    """CPU seconds spent from now on by the web process, the upstream and this client."""

    def __init__(self, web: int, upstream: int) -> None:
        self.web, self.upstream = web, upstream
        self.before = self._now()

    def _now(self) -> tuple[float, float, float]:
        return sum(loop_and_threads_cpu(self.web)), cpu_seconds(self.upstream), time.process_time()

    def seconds(self) -> tuple[float, float, float]:
        now = self._now()
        web, upstream, client = (after - before for after, before in zip(now, self.before, strict=True))
        return web, upstream, client


def added(level: Level, attribute: str) -> tuple[float, float]:
    direct = p50_p99([getattr(s, attribute) for s in level.direct if s.ok])
    gateway = p50_p99([getattr(s, attribute) for s in level.gateway if s.ok])
    return gateway[0] - direct[0], gateway[1] - direct[1]


def print_header() -> None:
    print(
        f"{'conc':>4} {'mode':>6} {'pairs':>5} {'direct TTFT':>14} {'gateway TTFT':>14} "
        f"{'added TTFT':>16} {'added total':>16} {'overhead-ms':>14} {'web CPU ms/req':>14} {'errors':>6}"
    )
    print(
        f"{'':>4} {'':>6} {'':>5} {'p50 / p99':>14} {'p50 / p99':>14} {'p50 / p99':>16} "
        f"{'p50 / p99':>16} {'p50 / p99':>14} {'loop + threads':>14}"
    )


def print_level(level: Level) -> None:
    ok_direct = [s for s in level.direct if s.ok]
    ok_gateway = [s for s in level.gateway if s.ok]
    errors = len(level.direct) + len(level.gateway) - len(ok_direct) - len(ok_gateway)
    if not ok_direct or not ok_gateway:
        print(f"{level.concurrency:>4} {level.mode:>6}   no answer ({errors} errors)", flush=True)
        return
    direct_ttft = p50_p99([s.ttft_ms for s in ok_direct])
    gateway_ttft = p50_p99([s.ttft_ms for s in ok_gateway])
    overhead = p50_p99([float(s.headers.get("x-playground-overhead-ms", "nan")) for s in ok_gateway])
    ttft, total = added(level, "ttft_ms"), added(level, "total_ms")
    loop_ms, threads_ms = (seconds / len(level.gateway) * 1000 for seconds in level.web_cpu_s)
    print(
        f"{level.concurrency:>4} {level.mode:>6} {len(level.gateway):>5} "
        f"{direct_ttft[0]:>6.1f} /{direct_ttft[1]:>6.1f} "
        f"{gateway_ttft[0]:>6.1f} /{gateway_ttft[1]:>6.1f} "
        f"{ttft[0]:>+7.2f} /{ttft[1]:>+7.2f} {total[0]:>+7.2f} /{total[1]:>+7.2f} "
        f"{overhead[0]:>6.2f} /{overhead[1]:>6.2f} "
        f"{loop_ms:>6.1f} +{threads_ms:>6.1f} "
        f"{errors:>6}",
        flush=True,
    )


def print_ttft_targets(levels: list[Level]) -> None:
    concurrency, p50_max, p99_max = TTFT_TARGETS_MS
    for level in levels:
        if level.concurrency != concurrency or not any(s.ok for s in level.gateway):
            continue
        p50, p99 = added(level, "ttft_ms")
        print(
            f"target at {concurrency}, {level.mode}: added TTFT p50 {p50:+.2f} ms (<= {p50_max:g}) "
            f"{verdict(p50 <= p50_max)}, p99 {p99:+.2f} ms (<= {p99_max:g}) {verdict(p99 <= p99_max)}"
        )


# --- the run ------------------------------------------------------------------------------------


def measure(args: argparse.Namespace, target: Target, web: int) -> None:
    gateway_samples: list[Sample] = []
    warm_up = Level(args.warm_up, stream=False)  # code paths, connections, the ledgers' rows
    uvloop.run(run_level(target, warm_up, args.warm_up))
    gateway_samples += warm_up.gateway
    levels: list[Level] = []
    print_header()
    for concurrency in args.concurrency:
        for stream in (True, False):
            level = Level(concurrency, stream)
            pairs = max(args.requests, 20 * concurrency if not args.smoke else 0)
            cpu_before = loop_and_threads_cpu(web)
            uvloop.run(run_level(target, level, pairs))
            after = loop_and_threads_cpu(web)
            level.web_cpu_s = (after[0] - cpu_before[0], after[1] - cpu_before[1])
            levels.append(level)
            gateway_samples += level.gateway
            print_level(level)
    print_ttft_targets(levels)

    busy = Busy(web, args.upstream_pid)
    samples, elapsed = uvloop.run(run_sustained(target, args.sustain, SUSTAIN_CONCURRENCY))
    web_cpu, upstream_cpu, client_cpu = busy.seconds()
    gateway_samples += samples
    ok = [s for s in samples if s.ok]
    rate = len(ok) / elapsed
    total = p50_p99([s.total_ms for s in ok])
    print(
        f"sustained, {SUSTAIN_CONCURRENCY} clients, whole answers, {elapsed:.1f} s: {len(samples)} requests, "
        f"{len(samples) - len(ok)} errors{first_error(samples)}; total p50 {total[0]:.1f} ms, p99 "
        f"{total[1]:.1f} ms; CPU cores busy: web {web_cpu / elapsed:.2f}, "
        f"upstream {upstream_cpu / elapsed:.2f}, client {client_cpu / elapsed:.2f}; "
        f"web CPU {web_cpu / len(samples) * 1000:.2f} ms/req"
    )
    print(f"gateway sustained: {rate:.0f} req/s (target >= {RATE_TARGET:g}) {verdict(rate >= RATE_TARGET)}")
    gateway_samples += measure_routed(args, target, web)
    errors = [s for s in gateway_samples if not s.ok]
    if errors:
        print(f"gateway errors: {len(errors)}{first_error(errors)}")
    check_records(
        [s for s in gateway_samples if "x-playground-request-id" in s.headers], len(gateway_samples)
    )


def measure_routed(args: argparse.Namespace, target: Target, web: int) -> list[Sample]:
    """The same closed loop with the key that follows the routing policy, in turns with the plain
    key (so both meet the same machine): web CPU per request of each, and the routed one's extra."""
    routed = replace(target, secret=target.routed_secret)
    cpu = {"plain": 0.0, "routed": 0.0}
    counts = {"plain": 0, "routed": 0}
    samples: list[Sample] = []
    for _ in range(ROUTED_ROUNDS):
        for name, each in (("plain", target), ("routed", routed)):
            busy = Busy(web, args.upstream_pid)
            done, _elapsed = uvloop.run(
                run_sustained(each, args.sustain / ROUTED_ROUNDS, SUSTAIN_CONCURRENCY)
            )
            cpu[name] += busy.seconds()[0]
            counts[name] += len(done)
            samples += done
    plain, routed_ms = (cpu[name] / max(1, counts[name]) * 1000 for name in ("plain", "routed"))
    extra = routed_ms / plain - 1 if plain else 0.0
    print(
        f"routed ({len(ROUTED_POLICY['rules'])} rules, a weighted group in a fallback): web CPU "
        f"{routed_ms:.2f} ms/req vs {plain:.2f} ms/req plain, {extra * 100:+.1f} % "
        f"(target <= +{ROUTED_TARGET * 100:.0f} %) "
        f"{verdict(extra <= ROUTED_TARGET)}; {counts['routed']} routed and {counts['plain']} plain requests"
    )
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument(
        "--requests", type=int, default=600, help="pairs per level and mode (at least 20 per client)"
    )
    parser.add_argument("--sustain", type=float, default=20.0, help="seconds of the closed loop")
    parser.add_argument("--warm-up", type=int, default=64, help="pairs sent first, not counted")
    add_upstream_arguments(parser)
    parser.add_argument("--services", action="store_true", help="production profile: PostgreSQL + Redis")
    parser.add_argument("--workers", type=int, default=1, help="web processes (uvicorn --workers)")
    parser.add_argument("--py-spy", default="", metavar="FILE", help="record the web process with py-spy")
    parser.add_argument("--smoke", action="store_true", help="a few requests on 1 and 4 clients (seconds)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)

    profile = choose_profile(args.services)
    data_dir = app_environment("gateway-overhead-")
    upstream_port, upstream = start_upstream(args.ttft_ms, args.chunks, args.every_ms)
    args.upstream_pid = upstream.pid
    app_port = free_port()
    server: subprocess.Popen[bytes] | None = None
    try:
        with bench_database(profile):
            secret, routed_secret = prepare_app(f"http://127.0.0.1:{upstream_port}", ROUTED_POLICY)
            server = subprocess.Popen(
                web_command(app_port, args.py_spy, args.workers), cwd=ROOT, env=os.environ.copy()
            )
            web = web_pid(server, bool(args.py_spy))
            wait_for_port(app_port, server, "app server")
            print(
                f"gateway overhead, {profile.name}, {args.workers} web process(es): upstream TTFT "
                f"{args.ttft_ms:g} ms, streams of {args.chunks} chunks every {args.every_ms:g} ms; "
                "times in ms, added = gateway - direct",
                flush=True,
            )
            measure(args, Target(upstream_port, app_port, secret, routed_secret), web)
            os.kill(web, signal.SIGTERM)  # under py-spy: py-spy then writes its file and exits
            server.wait(30)
    finally:
        stop(server)
        stop(upstream)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
