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
that a busy machine disturbs less than the latencies.

Each stream is its own user's, signed in with its own session, in one team on one
connection: 200 streams are 200 people with an answer streaming each, within the app's
per-user limits. (One user holding all 200 turns measured the per-user slot scan, which
tries each of the user's slots in turn, more than the relay.) The benchmark raises only the
per-minute turn limit (`CHAT_TURNS_PER_MINUTE`), since each user sends one turn per level.

    .venv/bin/python benchmarks/stream_relay.py [--concurrency 1 20 100 200] [--every-ms 20] [--chunks 500]
    .venv/bin/python benchmarks/stream_relay.py --smoke    # seconds: the test suite runs this
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.upstream import FakeUpstream, paced  # noqa: E402  (needs the repo on sys.path)

STAMP = re.compile(r"t=(\d+);")
FINISHED_MARKER = 'hx-swap-oob="outerHTML:#answer-'  # the stored answer replaces the streamed one
NOTICE = re.compile(r'class="chat-notice notice notice-error"[^>]*>([^<]*)<')  # a refused turn
WARM_UP_CHUNKS = 10
SMOKE = {"chunks": 20, "every_ms": 10.0, "concurrency": [1, 4]}
TARGETS_MS = ((20, 2.0), (200, 10.0))  # (up to this many streams, p95 added at most)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def prepare_app(data_dir: str, upstream_url: str, streams: int) -> list[tuple[str, int]]:
    """Migrate a fresh database; a team, a connection to the upstream, and `streams` members,
    each signed in (a session) with a conversation of their own."""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", "--noinput", verbosity=0)
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


async def read_relayed(app_url: str, session: str, conversation_id: int, chunks: int) -> list[float]:
    latencies: list[float] = []
    ws_url = app_url.replace("http://", "ws://") + f"/ws/chat/{conversation_id}/"
    headers = {"Cookie": f"sessionid={session}", "Origin": app_url}
    async with websockets.connect(ws_url, additional_headers=headers, max_size=None) as socket_:
        await socket_.send('{"action": "send", "message": "go"}')
        while len(latencies) < chunks:
            frame = str(await asyncio.wait_for(socket_.recv(), timeout=60))
            now = time.time_ns()
            if refused := NOTICE.search(frame):
                raise SystemExit(f"the app refused the benchmark's turn: {refused.group(1)}")
            latencies += [(now - int(sent)) / 1e6 for sent in STAMP.findall(frame)]
        while FINISHED_MARKER not in str(await asyncio.wait_for(socket_.recv(), timeout=60)):
            pass  # let the turn end (record written) before the socket closes
    return latencies


async def run_mode(
    upstream: FakeUpstream,
    concurrency: int,
    chunks: int,
    every_ms: float,
    app_url: str,
    seats: list[tuple[str, int]],
) -> tuple[list[float], list[float]]:
    """Direct readers first, then relayed ones; each phase runs `concurrency` streams at once."""
    upstream.script(*[paced(chunks, every_ms) for _ in range(concurrency)])
    direct = await asyncio.gather(*[read_direct(upstream.url, chunks) for _ in range(concurrency)])
    upstream.script(*[paced(chunks, every_ms) for _ in range(concurrency)])
    relayed = await asyncio.gather(*[read_relayed(app_url, *seats[i], chunks) for i in range(concurrency)])
    return [x for xs in direct for x in xs], [x for xs in relayed for x in xs]


def wait_for_app(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("the app server exited during start-up")
        try:
            httpx.get(url + "/login/", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit("the app server did not start")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def target_ms(concurrency: int) -> float:
    return next((limit for streams, limit in TARGETS_MS if concurrency <= streams), TARGETS_MS[-1][1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=500)
    parser.add_argument("--every-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 20, 100, 200])
    parser.add_argument("--smoke", action="store_true", help="a few chunks on 1 and 4 streams (seconds)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)

    data_dir = tempfile.mkdtemp(prefix="stream-relay-")
    Path(data_dir, "staticfiles").mkdir()  # ServeStatic warns about a missing static root
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "playground.settings",
            "PLAYGROUND_DATA_DIR": data_dir,
            "PROVIDER_HOST_ALLOWLIST": "127.0.0.1",
            "LOG_LEVEL": "WARNING",
            # Each user sends one turn per level (the first a warm-up turn too), within a minute.
            "CHAT_TURNS_PER_MINUTE": str(len(args.concurrency) + 1),
        }
    )
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    upstream = FakeUpstream()
    upstream.start()
    seats = prepare_app(data_dir, upstream.url, max(args.concurrency))
    port = free_port()
    app_url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "playground.asgi:application",
            "--port",
            str(port),
            "--no-access-log",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=os.environ.copy(),
    )
    try:
        wait_for_app(app_url, server)
        # The app's first turn loads code and templates: one turn that is not measured does it.
        upstream.script(paced(WARM_UP_CHUNKS, args.every_ms))
        asyncio.run(read_relayed(app_url, *seats[0], WARM_UP_CHUNKS))
        print(f"{args.chunks} chunks every {args.every_ms:g} ms; upstream send -> client receive, in ms")
        print(
            f"{'streams':>7} {'path':>8} {'p50':>8} {'p95':>8} {'max':>8}   added p50 / p95   "
            "app CPU per chunk"
        )
        for concurrency in args.concurrency:
            cpu_before = cpu_seconds(server.pid)
            direct, relayed = asyncio.run(
                run_mode(upstream, concurrency, args.chunks, args.every_ms, app_url, seats)
            )
            cpu_per_chunk_us = (cpu_seconds(server.pid) - cpu_before) / len(relayed) * 1e6
            for name, values in (("direct", direct), ("relayed", relayed)):
                print(
                    f"{concurrency:>7} {name:>8} {statistics.median(values):>8.2f} "
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
                        f"   ({verdict} the {target:g} ms p95 target)",
                        end="",
                    )
                print()
    finally:
        server.terminate()
        server.wait(10)
        upstream.stop()


if __name__ == "__main__":
    main()
