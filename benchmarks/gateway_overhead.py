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
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODEL = "@cf/moonshotai/kimi-k2.5"  # catalogued and priced from the seed
PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
REDIS_URL = "redis://127.0.0.1:6379/12"
# Its own per run: two runs at once (two sessions) must not drop each other's database.
BENCH_DB = f"bench_gateway_{os.getpid()}"
LIMIT_USD = 1_000_000  # every budget: held and settled on each request, never reached
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


# --- the loopback upstream (its own process) --------------------------------------------------


def _chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _sse(frame: dict[str, Any]) -> bytes:
    return _chunked(b"data: " + json.dumps(frame, separators=(",", ":")).encode() + b"\n\n")


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1775107512,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def upstream_main(port: int, ttft_ms: float, chunks: int, every_ms: float) -> None:
    """Serve OpenAI chat completions on loopback until killed (`--upstream-port`)."""
    usage = {"prompt_tokens": 12, "completion_tokens": chunks, "total_tokens": 12 + chunks}
    token = _sse(_chunk({"content": "word "}))
    tail = _sse(_chunk({}, "stop"))
    usage_chunk = _sse(
        {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "choices": [], "usage": usage}
    )
    done = _chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n"
    stream_head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        b"x-request-id: bench\r\n\r\n"
    )
    answer = json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1775107512,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "word " * chunks},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
        }
    ).encode()
    answer_reply = (
        f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(answer)}\r\n"
        "x-request-id: bench\r\n\r\n"
    ).encode() + answer
    ttft, every = ttft_ms / 1000, every_ms / 1000

    async def reply(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
        if not body.get("stream"):
            await asyncio.sleep(ttft)
            writer.write(answer_reply)
            return
        writer.write(stream_head)  # the head at once, the first token after the wait, as the APIs do
        await asyncio.sleep(ttft)
        for position in range(chunks):
            if position:
                await asyncio.sleep(every)
            writer.write(token)
            await writer.drain()
        wants_usage = (body.get("stream_options") or {}).get("include_usage")
        writer.write(tail + (usage_chunk if wants_usage else b"") + done)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = _content_length(head)
                await reply(writer, json.loads(await reader.readexactly(length)) if length else {})
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def run() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=1024)
        async with server:
            await server.serve_forever()

    uvloop.run(run())


def _content_length(head: bytes) -> int:
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 0


# --- the client: one keep-alive HTTP/1.1 connection per client and path -------------------------


@dataclass
class Sample:
    ttft_ms: float
    total_ms: float
    status: int
    headers: dict[str, str]
    complete: bool  # a stream ended with [DONE]; a whole answer was read whole

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.complete


class Connection:
    """Sends prepared requests on one socket (opened again when the server closed it) and times them.

    A raw client, as cheap as it can be: on two cores, every millisecond of the client's
    CPU is taken from the gateway or the upstream."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def send(self, request: bytes) -> Sample:
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        reader = self.reader
        started = time.perf_counter()
        self.writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines if line)
        }
        first: float | None = None
        body = bytearray()
        if "content-length" in headers:
            body += await reader.readexactly(int(headers["content-length"]))
            first = time.perf_counter()
        else:  # chunked
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                body += (await reader.readexactly(size + 2))[:-2]
                first = first or time.perf_counter()
            await reader.readuntil(b"\r\n")
        ended = time.perf_counter()
        if headers.get("connection", "").lower() == "close":
            await self.close()
        stream = headers.get("content-type", "").startswith("text/event-stream")
        complete = body.rstrip().endswith(b"data: [DONE]") if stream else bool(body)
        return Sample(
            ttft_ms=((first or ended) - started) * 1000,
            total_ms=(ended - started) * 1000,
            status=int(status_line.split()[1]),
            headers=headers,
            complete=complete,
        )

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def http_request(port: int, path: str, body: dict[str, Any], headers: dict[str, str]) -> bytes:
    payload = json.dumps(body).encode()
    lines = [
        f"POST {path} HTTP/1.1",
        f"host: 127.0.0.1:{port}",
        "content-type: application/json",
        f"content-length: {len(payload)}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


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


# --- the app: its database, its server ----------------------------------------------------------


@dataclass
class Profile:
    name: str
    database_url: str  # "" for the embedded profile
    admin_url: str = ""


def choose_profile(args: argparse.Namespace) -> Profile:
    if not (args.services or os.environ.get("DATABASE_URL") or os.environ.get("REDIS_URL")):
        for name in ("DATABASE_URL", "REDIS_URL"):
            os.environ.pop(name, None)
        return Profile("embedded (SQLite, limits in memory)", "")
    given = os.environ.get("DATABASE_URL", "")
    admin_url = given.rsplit("/", 1)[0] + "/postgres" if given else PG_ADMIN_URL
    os.environ.setdefault("REDIS_URL", REDIS_URL)
    # The production profile refuses to start without shared secrets; a throwaway database
    # makes do with fixed ones. HTTPS off: the benchmark speaks plain HTTP on loopback.
    for name in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY"):
        os.environ.setdefault(name, f"benchmark-only-{name.lower()}")
    os.environ["HTTPS"] = "false"
    database_url = admin_url.rsplit("/", 1)[0] + f"/{BENCH_DB}"
    os.environ["DATABASE_URL"] = database_url
    return Profile(
        f"production (PostgreSQL {BENCH_DB}, Redis {os.environ['REDIS_URL']})", database_url, admin_url
    )


@contextmanager
def bench_database(profile: Profile) -> Iterator[None]:
    """A fresh PostgreSQL database for the production profile, dropped afterwards."""
    if not profile.database_url:
        yield
        return
    import psycopg

    with psycopg.connect(profile.admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
    try:
        yield
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(profile.admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")


def prepare_app(upstream_url: str) -> tuple[str, str]:
    """Migrate; a team with budgets, its connection to the upstream, a key on it and a key that
    follows the team's routing policy (`ROUTED_POLICY`). Returns the two secrets."""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", "--noinput", verbosity=0)
    from django.contrib.auth.models import User
    from django.db import connections

    from playground.accounts.models import Membership
    from playground.providers.models import ConnectionKind, ProviderConnection
    from playground.providers.services import connection_save
    from playground.routing.services import routing_policy_save
    from playground.teams.creation import team_create
    from playground.usage.api_keys import api_key_issue
    from playground.usage.models import TeamBudget

    user = User.objects.create_user("bench", password="bench-password-123")
    team = team_create(name="Bench", owner=user)
    TeamBudget.objects.create(team=team, monthly_limit_usd=LIMIT_USD)
    Membership.objects.filter(team=team, user=user).update(monthly_budget_usd=LIMIT_USD)
    connection = connection_save(
        connection=ProviderConnection(
            team=team, name="Loopback", kind=ConnectionKind.OPENAI_COMPATIBLE, base_url=upstream_url + "/v1"
        ),
        token="bench-token",
    )
    _, secret = api_key_issue(
        team_id=team.pk,
        name="bench",
        connection_id=connection.pk,
        created_by_id=user.pk,
        monthly_budget_usd=LIMIT_USD,
        requests_per_minute=10_000_000,
        tokens_per_minute=1_000_000_000,
    )
    routing_policy_save(team=team, document=ROUTED_POLICY, user=user, note="benchmark")
    _, routed_secret = api_key_issue(
        team_id=team.pk,
        name="bench-routed",
        connection_id=connection.pk,
        created_by_id=user.pk,
        monthly_budget_usd=LIMIT_USD,
        requests_per_minute=10_000_000,
        tokens_per_minute=1_000_000_000,
        follows_policy=True,
    )
    connections.close_all()  # SQLite: no lock held by this process while the server writes
    return secret, routed_secret


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the {what} exited during start-up")
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit(f"the {what} did not start")


def web_command(port: int, py_spy_out: str, workers: int) -> list[str]:
    """The Procfile's web command (with `--workers` when more than one); under py-spy when asked."""
    command = [
        sys.executable, "-m", "uvicorn", "playground.asgi:application", "--host", "127.0.0.1",
        "--port", str(port), "--no-access-log", "--lifespan", "off", "--ws-max-size", "1048576",
        "--log-level", "warning", *(["--workers", str(workers)] if workers > 1 else []),
    ]  # fmt: skip
    if not py_spy_out:
        return command
    py_spy = os.environ.get("PY_SPY") or shutil.which("py-spy")
    if py_spy is None:
        raise SystemExit("--py-spy needs py-spy on PATH or in PY_SPY (pip install py-spy)")
    return [
        py_spy,
        "record",
        "--format",
        "raw",
        "--threads",
        "--subprocesses",
        "--rate",
        "250",
        "-o",
        py_spy_out,
        "--",
        *command,
    ]


def web_pid(process: subprocess.Popen[bytes], under_py_spy: bool) -> int:
    """The web server's own pid (py-spy's child when it runs under py-spy)."""
    if not under_py_spy:
        return process.pid
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if pids := children.read_text().split():
            return int(pids[0])
        time.sleep(0.1)
    raise SystemExit("py-spy started no web server")


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


def cpu_seconds(pid: int, task: str = "") -> float:
    """User + system CPU time of a process (or one of its threads) so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}{task}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def web_processes(pid: int) -> list[int]:
    """The web server and its workers (uvicorn `--workers`: its children)."""
    try:
        return [pid, *map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]
    except OSError:
        return [pid]


def loop_and_threads_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of the web processes' main threads (uvicorn's event loops) and of the rest of
    them (asgiref's thread, where the gateway's database work runs, and any other)."""
    processes = web_processes(pid)
    loop = sum(cpu_seconds(process, f"/task/{process}") for process in processes)
    return loop, sum(cpu_seconds(process) for process in processes) - loop


# --- figures ------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def p50_p99(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), percentile(values, 99)


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


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


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


def first_error(samples: list[Sample]) -> str:
    bad = next((s for s in samples if not s.ok), None)
    return "" if bad is None else f" (first: status {bad.status}, complete={bad.complete})"


def check_records(answered: list[Sample], sent: int) -> None:
    """Every answered request id has its record; prints the last line the smoke test reads."""
    from playground.usage.models import RequestPath, UsageRecord

    records = UsageRecord.objects.filter(path=RequestPath.GATEWAY)
    ids = {uuid.UUID(s.headers["x-playground-request-id"]) for s in answered}
    # A whole answer goes out before its record (`gateway.app`, `usage.calls.settlement`): wait
    # while records still arrive, so a loaded machine's lag is not counted as records lost.
    stored: set[uuid.UUID] = set()
    deadline = time.monotonic() + 60
    while True:
        before, stored = stored, set(records.values_list("request_id", flat=True))
        if ids <= stored or (stored == before and stored) or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    statuses = dict(Counter(records.values_list("status", flat=True)))
    print(
        f"records: {sent} gateway requests, {len(ids)} answered with a request id, "
        f"{len(stored)} records {statuses}, {len(ids - stored)} missing "
        f"{verdict(not ids - stored and len(stored) == len(ids) == sent)}"
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
    parser.add_argument("--ttft-ms", type=float, default=50.0, help="the upstream's time to first token")
    parser.add_argument("--chunks", type=int, default=10, help="content chunks per streamed answer")
    parser.add_argument("--every-ms", type=float, default=10.0, help="between two chunks")
    parser.add_argument("--services", action="store_true", help="production profile: PostgreSQL + Redis")
    parser.add_argument("--workers", type=int, default=1, help="web processes (uvicorn --workers)")
    parser.add_argument("--py-spy", default="", metavar="FILE", help="record the web process with py-spy")
    parser.add_argument("--smoke", action="store_true", help="a few requests on 1 and 4 clients (seconds)")
    parser.add_argument("--upstream-port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream_port:
        upstream_main(args.upstream_port, args.ttft_ms, args.chunks, args.every_ms)
        return
    if args.smoke:
        vars(args).update(SMOKE)

    profile = choose_profile(args)
    data_dir = tempfile.mkdtemp(prefix="gateway-overhead-")
    Path(data_dir, "staticfiles").mkdir()  # ServeStatic warns about a missing static root
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "playground.settings",
            "PLAYGROUND_DATA_DIR": data_dir,
            "PROVIDER_HOST_ALLOWLIST": "127.0.0.1",
            "LOG_LEVEL": "WARNING",
            # As `make run` counts metrics: every web process writes its counters to files here.
            "PROMETHEUS_MULTIPROC_DIR": str(Path(data_dir, "prometheus")),
        }
    )
    upstream_port, app_port = free_port(), free_port()
    upstream = subprocess.Popen(
        [sys.executable, __file__, "--upstream-port", str(upstream_port), "--ttft-ms", str(args.ttft_ms),
         "--chunks", str(args.chunks), "--every-ms", str(args.every_ms)],
    )  # fmt: skip
    args.upstream_pid = upstream.pid
    server: subprocess.Popen[bytes] | None = None
    try:
        with bench_database(profile):
            wait_for_port(upstream_port, upstream, "upstream")
            secret, routed_secret = prepare_app(f"http://127.0.0.1:{upstream_port}")
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
        if server is not None and server.poll() is None:
            server.terminate()
            server.wait(10)
        upstream.terminate()
        upstream.wait(10)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
