"""How much latency the app adds when it relays a streamed answer to the browser.

A loopback upstream (the tests' fake, speaking OpenAI SSE) emits N chunks at a steady
pace, each stamped with its send time. The same kind of client then reads them two ways,
side by side in one run:
- direct: straight from the upstream over HTTP (the floor: network + parsing);
- relayed: through the full app — uvicorn, Channels, the chat consumer, the chat service,
  the provider adapter, the frame relay — as WebSocket frames.
Added latency is the relayed figure minus the direct one, at p50 and p95, for each
concurrency level. Targets (issue 22): p95 added <= 2 ms up to 20 streams, <= 10 ms at 200,
at 50 chunks/s per stream. It also prints the app's CPU time per relayed chunk, a figure
that a busy machine disturbs less than the latencies (issue 40: <= 100 us at 200 streams), and
the chunks per frame: a process that falls behind joins chunks into fewer frames, which lowers
its CPU per chunk, so two CPU figures compare only beside their chunks per frame.

Each stream is its own user's, signed in with its own session, in one team on one
connection: 200 streams are 200 people with an answer streaming each, within the app's
per-user limits. (One user holding all 200 turns measured the per-user slot scan, which
tries each of the user's slots in turn, more than the relay.) The benchmark raises only the
per-minute turn limit (`CHAT_TURNS_PER_MINUTE`), since each user sends one turn per level.

Embedded profile by default (SQLite, the in-memory channel layer); `--services` runs the
production one: a fresh PostgreSQL database and Redis (`benchmarks.gateway_harness`). The app
can run in several variants measured side by side, taking turns at each level (`--rounds` each):
each count of web processes in `--workers` (one port shared by the processes) under each ASGI
server in `--servers` (uvicorn as `Procfile.production` runs it, or granian with the same
settings). A variant's CPU is that of all its processes; the clients share the machine's cores.

    .venv/bin/python benchmarks/stream_relay.py [--concurrency 1 20 100 200] [--every-ms 20] [--chunks 500]
    .venv/bin/python benchmarks/stream_relay.py --services --workers 1 2 --concurrency 200 --rounds 2
    .venv/bin/python benchmarks/stream_relay.py --servers uvicorn granian --concurrency 200
    .venv/bin/python benchmarks/stream_relay.py --smoke    # seconds: the test suite runs this
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.gateway_harness import (  # noqa: E402  (needs the repo on sys.path)
    SERVERS,
    app_environment,
    bench_database,
    choose_profile,
    free_port,
    percentile,
    stop,
    tree_cpu_seconds,
    wait_for_port,
    web_command,
)
from tests.fakes.upstream import FakeUpstream, paced  # noqa: E402

STAMP = re.compile(r"t=(\d+);")
FINISHED_MARKER = 'hx-swap-oob="outerHTML:#answer-'  # the stored answer replaces the streamed one
NOTICE = re.compile(r'class="chat-notice notice notice-error"[^>]*>([^<]*)<')  # a refused turn
WARM_UP_CHUNKS = 10
WARM_UP_STREAMS = 4  # per web process
SMOKE = {"chunks": 20, "every_ms": 10.0, "concurrency": [1, 4]}
TARGETS_MS = ((20, 2.0), (200, 10.0))  # (up to this many streams, p95 added at most)


def prepare_app(upstream_url: str, streams: int) -> list[tuple[str, int]]:
    """Migrate a fresh database; a team, a connection to the upstream, and `streams` members,
    each signed in (a session) with a conversation of their own."""
    import django

    from benchmarks.schema import database_migrated

    django.setup()
    database_migrated()
    from django.contrib.auth.models import User
    from django.test import Client

    from playground.accounts.models import Membership, Role
    from playground.chat.services.conversations import conversation_create
    from playground.providers.models import ConnectionKind, ProviderConnection
    from playground.providers.services import connection_save
    from playground.teams.creation import team_create

    user = User.objects.create_user("bench", password="bench-password-123")
    team = team_create(name="Bench", owner=user)
    connection = connection_save(
        connection=ProviderConnection(
            team=team, name="Paced", kind=ConnectionKind.OPENAI_COMPATIBLE, base_url=upstream_url + "/v1"
        ),
        token="bench-token",
    )
    people = [user]
    for n in range(1, streams):
        member = User.objects.create_user(f"bench-{n}", password="bench-password-123")
        Membership.objects.create(team=team, user=member, role=Role.MEMBER)
        people.append(member)
    seats = []
    for person in people:
        conversation = conversation_create(
            user=person, connection_id=connection.pk, model_id="paced", use_affinity=False
        )
        client = Client()
        client.force_login(person)
        seats.append((client.cookies["sessionid"].value, conversation.pk))
    from django.db import connections

    connections.close_all()  # SQLite: no lock held by this process while the servers write
    return seats


async def read_direct(upstream_url: str, chunks: int) -> list[float]:
    latencies: list[float] = []
    async with (
        httpx.AsyncClient(timeout=60) as client,
        client.stream(
            "POST",
            upstream_url + "/v1/chat/completions",
            json={"model": "paced", "stream": True, "messages": [{"role": "user", "content": "go"}]},
        ) as response,
    ):
        async for line in response.aiter_lines():
            now = time.time_ns()
            latencies += [(now - int(sent)) / 1e6 for sent in STAMP.findall(line)]
    assert len(latencies) == chunks, f"direct read {len(latencies)} of {chunks} chunks"
    return latencies


async def read_relayed(
    app_url: str, session: str, conversation_id: int, chunks: int
) -> tuple[list[float], int]:
    """Each chunk's latency, and how many frames brought them (the relay joins chunks under load)."""
    latencies: list[float] = []
    frames = 0
    ws_url = app_url.replace("http://", "ws://") + f"/ws/chat/{conversation_id}/"
    headers = {"Cookie": f"sessionid={session}", "Origin": app_url}
    async with websockets.connect(ws_url, additional_headers=headers, max_size=None) as socket_:
        await socket_.send('{"action": "send", "message": "go"}')
        while len(latencies) < chunks:
            frame = str(await asyncio.wait_for(socket_.recv(), timeout=60))
            now = time.time_ns()
            if refused := NOTICE.search(frame):
                raise SystemExit(f"the app refused the benchmark's turn: {refused.group(1)}")
            stamps = STAMP.findall(frame)
            latencies += [(now - int(sent)) / 1e6 for sent in stamps]
            frames += bool(stamps)
        while FINISHED_MARKER not in str(await asyncio.wait_for(socket_.recv(), timeout=60)):
            pass  # let the turn end (record written) before the socket closes
    return latencies, frames


async def run_mode(
    upstream: FakeUpstream,
    concurrency: int,
    chunks: int,
    every_ms: float,
    app_url: str,
    seats: list[tuple[str, int]],
) -> tuple[list[float], list[float], int]:
    """Direct readers first, then relayed ones; each phase runs `concurrency` streams at once.
    The direct and relayed latencies, and the frames that brought the relayed ones."""
    upstream.script(*[paced(chunks, every_ms) for _ in range(concurrency)])
    direct = await asyncio.gather(*[read_direct(upstream.url, chunks) for _ in range(concurrency)])
    upstream.script(*[paced(chunks, every_ms) for _ in range(concurrency)])
    relayed = await asyncio.gather(*[read_relayed(app_url, *seats[i], chunks) for i in range(concurrency)])
    return [x for xs in direct for x in xs], [x for xs, _ in relayed for x in xs], sum(n for _, n in relayed)


@dataclass
class App:
    """One variant of the app server (an ASGI server with a count of processes) and its figures."""

    server: str
    workers: int
    process: subprocess.Popen[bytes]
    url: str
    cpu_s: dict[int, float] = field(default_factory=dict)  # per level: its processes' CPU seconds
    chunks: dict[int, tuple[list[float], list[float]]] = field(default_factory=dict)  # direct, relayed
    frames: dict[int, int] = field(default_factory=dict)  # per level: the relayed frames

    @property
    def name(self) -> str:
        return f"{self.server} x{self.workers}"


def start_app(server: str, workers: int) -> App:
    port = free_port()
    process = subprocess.Popen(web_command(port, "", workers, server), cwd=ROOT, env=os.environ.copy())
    wait_for_port(port, process, f"app server ({server})")
    return App(server, workers, process, f"http://127.0.0.1:{port}")


async def warm_up(upstream: FakeUpstream, app: App, seats: list[tuple[str, int]], every_ms: float) -> None:
    """Turns at once on a few sockets, so that each of the app's processes most likely takes some."""
    upstream.script(*[paced(WARM_UP_CHUNKS, every_ms) for _ in seats])
    await asyncio.gather(*[read_relayed(app.url, *seat, WARM_UP_CHUNKS) for seat in seats])


def target_ms(concurrency: int) -> float:
    return next((limit for streams, limit in TARGETS_MS if concurrency <= streams), TARGETS_MS[-1][1])


def measure(
    args: argparse.Namespace, upstream: FakeUpstream, apps: list[App], seats: list[tuple[str, int]]
) -> None:
    """Each level: the variants take turns (`--rounds` each, each round started by the next one)."""
    for concurrency in args.concurrency:
        for turn in range(args.rounds):
            shift = (turn + concurrency) % len(apps)
            for app in apps[shift:] + apps[:shift]:
                cpu_before = tree_cpu_seconds(app.process.pid)
                direct, relayed, frames = asyncio.run(
                    run_mode(upstream, concurrency, args.chunks, args.every_ms, app.url, seats)
                )
                app.cpu_s[concurrency] = (
                    app.cpu_s.get(concurrency, 0.0) + tree_cpu_seconds(app.process.pid) - cpu_before
                )
                before = app.chunks.get(concurrency, ([], []))
                app.chunks[concurrency] = (before[0] + direct, before[1] + relayed)
                app.frames[concurrency] = app.frames.get(concurrency, 0) + frames
        for app in apps:
            print_level(app, concurrency, named=len(apps) > 1)


def print_level(app: App, concurrency: int, *, named: bool) -> None:
    direct, relayed = app.chunks[concurrency]
    cpu_per_chunk_us = app.cpu_s[concurrency] / len(relayed) * 1e6
    label = f"{app.name:>18} " if named else ""
    for name, values in (("direct", direct), ("relayed", relayed)):
        print(
            f"{label}{concurrency:>7} {name:>8} {statistics.median(values):>8.2f} "
            f"{percentile(values, 95):>8.2f} {max(values):>8.2f}",
            end="",
        )
        if name == "relayed":
            added_p50 = statistics.median(relayed) - statistics.median(direct)
            added_p95 = percentile(relayed, 95) - percentile(direct, 95)
            target = target_ms(concurrency)
            verdict = "meets" if added_p95 <= target else "MISSES"
            print(
                f"   {added_p50:+.2f} / {added_p95:+.2f}   {cpu_per_chunk_us:>6.0f} us"
                f"   ({verdict} the {target:g} ms p95 target; "
                f"{len(relayed) / app.frames[concurrency]:.2f} chunks per frame)",
                end="",
            )
        print()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=500)
    parser.add_argument("--every-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 20, 100, 200])
    parser.add_argument("--services", action="store_true", help="production profile: PostgreSQL + Redis")
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1], help="web processes: each count a variant"
    )
    parser.add_argument(
        "--servers", nargs="+", choices=list(SERVERS), default=["uvicorn"], help="each a variant"
    )
    parser.add_argument("--rounds", type=int, default=1, help="turns each variant takes per level")
    parser.add_argument("--smoke", action="store_true", help="a few chunks on 1 and 4 streams (seconds)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)

    profile = choose_profile(args.services)
    data_dir = app_environment("stream-relay-")
    variants = [(server, workers) for server in args.servers for workers in args.workers]
    # Each user sends one turn per level, round and variant (and a warm-up turn each), within a minute.
    turns = (len(args.concurrency) * args.rounds + 1) * len(variants)
    os.environ["CHAT_TURNS_PER_MINUTE"] = str(turns)
    upstream = FakeUpstream()
    upstream.start()
    apps: list[App] = []
    try:
        with bench_database(profile):
            seats = prepare_app(upstream.url, max(args.concurrency))
            apps = [start_app(server, workers) for server, workers in variants]
            for app in apps:  # a process's first turn loads code and templates: turns not measured do it
                asyncio.run(warm_up(upstream, app, seats[: WARM_UP_STREAMS * app.workers], args.every_ms))
            print(
                f"{profile.name}; {args.chunks} chunks every {args.every_ms:g} ms; load average "
                f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; upstream send -> client receive, in ms"
            )
            label = f"{'server':>18} " if len(apps) > 1 else ""
            print(
                f"{label}{'streams':>7} {'path':>8} {'p50':>8} {'p95':>8} {'max':>8}   added p50 / p95   "
                "app CPU per chunk"
            )
            measure(args, upstream, apps, seats)
            print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
            for app in apps:
                stop(app.process)
    finally:
        for app in apps:
            stop(app.process)
        upstream.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
