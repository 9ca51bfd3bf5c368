"""The pieces the gateway benchmarks share: a loopback upstream, a raw client, the app on a fresh
database, and the CPU time of processes.

The upstream (its own process: `python -m benchmarks.gateway_harness --upstream-port N`, raw
asyncio on uvloop, speaking OpenAI chat completions) answers after a fixed time to first token:
a stream of steady chunks, then the usage chunk (when asked for) and `[DONE]`; or, not streamed,
the whole JSON answer after the same wait. The app runs as `make run` serves it (the Procfile's
uvicorn command) on a fresh database with a team, an OpenAI-compatible connection to the
upstream, a catalogued priced model and an API key whose budgets and limits are all far from
reached: every request holds and settles its ledgers and counts against its limits.

Profiles: embedded (a SQLite file in a temporary folder, limits counted in memory) or
production: a database `bench_gateway_<pid>` created on the PostgreSQL server of DATABASE_URL
(default the local one) and dropped afterwards, and Redis (default db 12 of the local one).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvloop

ROOT = Path(__file__).resolve().parent.parent

MODEL = "@cf/moonshotai/kimi-k2.5"  # catalogued and priced from the seed
PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
REDIS_URL = "redis://127.0.0.1:6379/12"
# Its own per run: two runs at once (two sessions) must not drop each other's database.
BENCH_DB = f"bench_gateway_{os.getpid()}"
LIMIT_USD = 1_000_000  # every budget: held and settled on each request, never reached

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
    body: bytes = b""

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
            body=bytes(body),
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


# --- the app: its database, its server ----------------------------------------------------------


@dataclass
class Profile:
    name: str
    database_url: str  # "" for the embedded profile
    admin_url: str = ""


def choose_profile(services: bool) -> Profile:
    """Embedded, unless `services` or DATABASE_URL or REDIS_URL is set: then PostgreSQL + Redis."""
    if not (services or os.environ.get("DATABASE_URL") or os.environ.get("REDIS_URL")):
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


def prepare_app(upstream_url: str, routing_policy: dict[str, Any] | None = None) -> tuple[str, str]:
    """Migrate; a team with budgets, its connection to the upstream, a key on it and, given a
    routing policy, a key that follows it. Returns the two secrets ("" for the second without)."""
    import django

    from benchmarks.schema import database_migrated

    django.setup()
    database_migrated()
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

    def issue(name: str, *, follows_policy: bool = False) -> str:
        _, secret = api_key_issue(
            team_id=team.pk,
            name=name,
            connection_id=connection.pk,
            created_by_id=user.pk,
            monthly_budget_usd=LIMIT_USD,
            requests_per_minute=10_000_000,
            tokens_per_minute=1_000_000_000,
            follows_policy=follows_policy,
        )
        return secret

    secrets = [issue("bench")]
    if routing_policy is not None:
        routing_policy_save(team=team, document=routing_policy, user=user, note="benchmark")
        secrets.append(issue("bench-routed", follows_policy=True))
    connections.close_all()  # SQLite: no lock held by this process while the server writes
    return secrets[0], secrets[-1] if routing_policy is not None else ""


def app_environment(prefix: str) -> str:
    """A temporary data folder and the environment the app server inherits; returns the folder."""
    data_dir = tempfile.mkdtemp(prefix=prefix)
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
    return data_dir


def start_upstream(ttft_ms: float, chunks: int, every_ms: float) -> tuple[int, subprocess.Popen[bytes]]:
    """The loopback upstream in its own process, listening once this returns: its port and process."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.gateway_harness", "--upstream-port", str(port),
         "--ttft-ms", str(ttft_ms), "--chunks", str(chunks), "--every-ms", str(every_ms)],
        cwd=ROOT,
    )  # fmt: skip
    wait_for_port(port, process, "upstream")
    return port, process


def stop(process: subprocess.Popen[Any] | None) -> None:
    """Terminate a process this run started (and wait for it), if still running."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the {what} exited during start-up")
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit(f"the {what} did not start")


# The ASGI servers the benchmarks can run the app under, each with its one-letter mark: uvicorn as
# the Procfiles run it; uvicorn compressing WebSocket frames (permessage-deflate, its default, which
# the Procfiles turn off: issue 40's relay); granian.
SERVERS = {"uvicorn": "u", "uvicorn-deflate": "d", "granian": "g"}


def server_command(server: str, port: int, workers: int) -> list[str]:
    """The Procfile's web command under `server` (`SERVERS`; with its workers when more than one):
    uvicorn as `Procfile.production` runs it, or granian as close to it as it goes (ASGI without
    lifespan, uvloop, no access log; granian has no limit on a WebSocket message's size to set,
    and compresses no WebSocket frame)."""
    if server == "granian":
        if importlib.util.find_spec("granian") is None:
            raise SystemExit("--servers granian needs granian in the virtualenv (pip install granian)")
        return [
            sys.executable, "-m", "granian", "--interface", "asginl", "--loop", "uvloop",
            "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers), "--no-access-log",
            "--log-level", "warning", "playground.asgi:application",
        ]  # fmt: skip
    return [
        sys.executable, "-m", "uvicorn", "playground.asgi:application", "--host", "127.0.0.1",
        "--port", str(port), "--no-access-log", "--lifespan", "off", "--ws-max-size", "1048576",
        *([] if server == "uvicorn-deflate" else ["--ws-per-message-deflate", "false"]),
        "--log-level", "warning", *(["--workers", str(workers)] if workers > 1 else []),
    ]  # fmt: skip


def web_command(port: int, py_spy_out: str, workers: int, server: str = "uvicorn") -> list[str]:
    """The web server's command (`server_command`); under py-spy when asked."""
    command = server_command(server, port, workers)
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


def process_tree(pid: int) -> list[int]:
    """A process and all its live descendants (of every thread)."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                pending += map(int, (task / "children").read_text().split())
            except OSError:
                continue
    return found


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of a process and its live descendants (Linux /proc)."""
    return sum(cpu_seconds(process) for process in process_tree(pid))


def loop_and_threads_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of the web processes' main threads (uvicorn's event loops) and of the rest of
    them (asgiref's thread, where the gateway's database work runs, and any other)."""
    processes = web_processes(pid)
    loop = sum(cpu_seconds(process, f"/task/{process}") for process in processes)
    return loop, sum(cpu_seconds(process) for process in processes) - loop


# --- figures ---


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def p50_p99(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), percentile(values, 99)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


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


def add_upstream_arguments(parser: argparse.ArgumentParser) -> None:
    """The upstream's pace: its time to first token, a stream's chunks and the time between them."""
    parser.add_argument("--ttft-ms", type=float, default=50.0, help="the upstream's time to first token")
    parser.add_argument("--chunks", type=int, default=10, help="content chunks per streamed answer")
    parser.add_argument("--every-ms", type=float, default=10.0, help="between two chunks")


def main() -> None:
    """The upstream's own process (see `start_upstream`)."""
    parser = argparse.ArgumentParser(description="the loopback upstream of the gateway benchmarks")
    parser.add_argument("--upstream-port", type=int, required=True)
    add_upstream_arguments(parser)
    args = parser.parse_args()
    upstream_main(args.upstream_port, args.ttft_ms, args.chunks, args.every_ms)


if __name__ == "__main__":
    main()
