"""Our gateway beside the gateways we can run next to it: the same requests, directly, through
ours, through LiteLLM's proxy and through Portkey's open-source gateway (issue 40).

The loopback upstream of `gateway_harness` answers OpenAI chat completions after a 50 ms time
to first token. Our gateway runs as `make run` serves it, with a real team key whose budgets
and per-minute limits are held, counted and settled on every request, and a usage record
written for each. The peers run with their documented production settings:

- LiteLLM proxy 1.108.7 (`var/peers/litellm-venv`, its own virtualenv): one worker, no
  database, a master key, `LITELLM_MODE=PRODUCTION`, `LITELLM_LOG=ERROR`, `set_verbose: false`
  and `json_logs: true`, and its bundled model cost map (no fetch at start-up).
- Portkey's gateway 1.15.2 (`var/peers/portkey`, npm): `NODE_ENV=production`, `--headless`,
  the upstream named per request (`x-portkey-provider: openai`, `x-portkey-custom-host`). Its
  `@hono/node-server` dependency is pinned to 1.14.1 (npm overrides): with the version npm
  picks, every streamed request fails (Portkey-AI/gateway#1389).

Missing peers are installed on demand into `var/peers/` (gitignored), unless `--no-install`
or `--smoke`: then a peer not installed is skipped.

At each concurrency C, streamed and whole, the targets take turns in rotating rounds (each
round starts with the next one), C clients sending one request after another on keep-alive
connections, so each meets the machine's load as the others do. Time to first token (TTFT)
is the time to the first chunk of the body; total, to its last byte; added = the target's
percentile minus the direct one's. CPU = user + system time of the target's processes and
their children (from /proc) over its turns, per request: idle costs (timers, sweeps) count.
Then `--sustain` seconds of a closed loop of 16 clients with whole answers per target, in
rounds too: the sustained rate and its CPU per request. Every answer's text must equal the
direct one's, and every request through ours must have left its usage record. With the
PostgreSQL + Redis profile, the CPU of the PostgreSQL server processes connected to our
database is shown beside ours ("+x ms PostgreSQL"), not in it; Redis's is not counted.

The machine may be busy with other work: the load average is printed before and after, and
the figures are for comparing side by side (ratios to ours), not as absolutes.

Ours can run in several variants side by side, as targets of their own (the ratios are to the
first): with each count of web processes in `--web-processes` (one port shared by the processes,
as a reverse proxy spreads the connections of `make run-production`'s) and under each ASGI server
in `--servers` (uvicorn as `Procfile.production` runs it, or granian with the same settings).
Their CPU is that of all their processes.

    .venv/bin/python benchmarks/gateway_peers.py [--profile embedded|services] [--sustain 15]
    .venv/bin/python benchmarks/gateway_peers.py --peers portkey --concurrency 16
    .venv/bin/python benchmarks/gateway_peers.py --profile services --peers --web-processes 1 2
    .venv/bin/python benchmarks/gateway_peers.py --peers --servers uvicorn granian
    .venv/bin/python benchmarks/gateway_peers.py --smoke     # seconds; installed peers only
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.gateway_harness import (  # noqa: E402  (needs the repo on sys.path)
    MODEL,
    SERVERS,
    Connection,
    Profile,
    Sample,
    add_upstream_arguments,
    app_environment,
    bench_database,
    check_records,
    choose_profile,
    cpu_seconds,
    free_port,
    http_request,
    p50_p99,
    prepare_app,
    start_upstream,
    stop,
    tree_cpu_seconds,
    wait_for_port,
    web_command,
)

PEERS_DIR = ROOT / "var" / "peers"
LITELLM_VERSION = "1.108.7"
LITELLM_VENV = PEERS_DIR / "litellm-venv"
LITELLM_KEY = "sk-bench-master-key"
PORTKEY_VERSION = "1.15.2"
PORTKEY_DIR = PEERS_DIR / "portkey"
PORTKEY_PACKAGE = PORTKEY_DIR / "node_modules" / "@portkey-ai" / "gateway"
HONO_NODE_SERVER = "1.14.1"  # Portkey-AI/gateway#1389: later versions fail every stream
UPSTREAM_TOKEN = "bench-token"
SUSTAIN_CONCURRENCY = 16
START_TIMEOUT = 180.0  # seconds: LiteLLM's proxy imports a lot on two busy cores
SMOKE = {"concurrency": [1, 4], "requests": 8, "rounds": 2, "sustain": 2.0, "warm_up": 4}


# --- the targets ----------------------------------------------------------------------------------


@dataclass
class Target:
    """Where the same chat completion goes, and the processes whose CPU it costs."""

    name: str
    port: int
    headers: dict[str, str]
    pid: int = 0  # 0: no gateway process (direct)
    database: str = ""  # the PostgreSQL database it writes to: its server processes' CPU is shown apart
    cells: dict[tuple[int, bool], Cell] = field(default_factory=dict)
    sustained: Cell | None = None

    def request(self, *, stream: bool) -> bytes:
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "Say a few words."}],
            "max_tokens": 64,
            "stream": stream,
        }
        return http_request(self.port, "/v1/chat/completions", body, self.headers)

    def cpu_seconds(self) -> tuple[float, float]:
        """Its processes' CPU seconds so far, and its database's server processes' (live ones)."""
        own = tree_cpu_seconds(self.pid) if self.pid else 0.0
        return own, database_cpu_seconds(self.database) if self.database else 0.0

    def cell(self, key: tuple[int, bool]) -> Cell:
        return self.cells.setdefault(key, Cell())


@dataclass
class Cell:
    """One target's samples at one concurrency and mode, its CPU seconds and time over them."""

    samples: list[Sample] = field(default_factory=list)
    cpu_s: float = 0.0
    database_cpu_s: float = 0.0
    elapsed_s: float = 0.0
    wrong: int = 0  # answered, but not with the direct answer's text

    def good(self) -> list[Sample]:
        return [s for s in self.samples if s.ok]

    @property
    def errors(self) -> int:
        return len(self.samples) - len(self.good()) + self.wrong

    @property
    def cpu_ms_per_request(self) -> float:
        return self.cpu_s / max(1, len(self.samples)) * 1000

    def database_note(self) -> str:
        if not self.database_cpu_s:
            return ""
        return f" (+{self.database_cpu_s / max(1, len(self.samples)) * 1000:.2f} ms PostgreSQL)"


def database_cpu_seconds(database: str) -> float:
    """CPU seconds of the PostgreSQL server processes now connected to `database` (on this machine)."""
    total = 0.0
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            command = cmdline.read_bytes()
        except OSError:
            continue
        if command.startswith(b"postgres: ") and f" {database} ".encode() in command:
            total += cpu_seconds(int(cmdline.parent.name))
    return total


def answer_text(sample: Sample) -> str | None:
    """The assistant's text of a whole answer or of a stream's deltas (None when unreadable)."""
    try:
        if not sample.headers.get("content-type", "").startswith("text/event-stream"):
            return str(json.loads(sample.body)["choices"][0]["message"]["content"])
        parts = []
        for line in sample.body.decode().splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for choice in json.loads(line[6:]).get("choices") or []:
                    parts.append((choice.get("delta") or {}).get("content") or "")
        return "".join(parts)
    except (ValueError, KeyError, IndexError, TypeError):
        return None


# --- the peers: installed on demand, started with their production settings ----------------------


def run_quietly(command: list[str], cwd: Path | None = None) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def litellm_version() -> str:
    """The installed LiteLLM's version, "" when not installed."""
    python = LITELLM_VENV / "bin" / "python"
    if not (LITELLM_VENV / "bin" / "litellm").exists():
        return ""
    done = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip()


def peer_python() -> str:
    """Python 3.12 or later when the machine has one that runs, else the machine's python3."""
    for name in ("python3.13", "python3.12", "python3"):
        found = shutil.which(name)
        if found and subprocess.run([found, "--version"], capture_output=True, check=False).returncode == 0:
            return found
    return sys.executable


def install_litellm() -> None:
    print(f"installing LiteLLM {LITELLM_VERSION} into {LITELLM_VENV} ...", flush=True)
    run_quietly([peer_python(), "-m", "venv", "--clear", str(LITELLM_VENV)])
    run_quietly([str(LITELLM_VENV / "bin" / "pip"), "install", "-q", f"litellm[proxy]=={LITELLM_VERSION}"])


def package_version(package_dir: Path) -> str:
    try:
        return str(json.loads((package_dir / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return ""


def portkey_versions() -> tuple[str, str]:
    """The installed Portkey gateway's version and its @hono/node-server's ("" when absent)."""
    hono = PORTKEY_DIR / "node_modules" / "@hono" / "node-server"
    return package_version(PORTKEY_PACKAGE), package_version(hono)


def install_portkey() -> None:
    print(f"installing Portkey's gateway {PORTKEY_VERSION} into {PORTKEY_DIR} ...", flush=True)
    PORTKEY_DIR.mkdir(parents=True, exist_ok=True)
    manifest = {
        "name": "portkey-peer",
        "private": True,
        "dependencies": {"@portkey-ai/gateway": PORTKEY_VERSION},
        "overrides": {"@hono/node-server": HONO_NODE_SERVER},
    }
    (PORTKEY_DIR / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    run_quietly(["npm", "install", "--no-audit", "--no-fund"], cwd=PORTKEY_DIR)


def peer_environment() -> dict[str, str]:
    """Our environment without what would point a peer at our database, Redis or settings."""
    ours = {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "PROMETHEUS_MULTIPROC_DIR"}
    return {name: value for name, value in os.environ.items() if name not in ours}


def start_litellm(upstream_port: int, work_dir: str) -> tuple[Target, subprocess.Popen[bytes], str]:
    version = litellm_version()
    config = {  # JSON is YAML
        "model_list": [
            {
                "model_name": MODEL,
                "litellm_params": {
                    "model": f"openai/{MODEL}",
                    "api_base": f"http://127.0.0.1:{upstream_port}/v1",
                    "api_key": UPSTREAM_TOKEN,
                },
            }
        ],
        "litellm_settings": {"set_verbose": False, "json_logs": True},
        "general_settings": {"master_key": LITELLM_KEY},
    }
    config_path = Path(work_dir, "litellm.yaml")
    config_path.write_text(json.dumps(config))
    port = free_port()
    env = peer_environment() | {
        "LITELLM_MODE": "PRODUCTION",
        "LITELLM_LOG": "ERROR",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    process = subprocess.Popen(
        [str(LITELLM_VENV / "bin" / "litellm"), "--config", str(config_path), "--host", "127.0.0.1",
         "--port", str(port), "--num_workers", "1"],
        env=env, cwd=work_dir, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for_port(port, process, "LiteLLM proxy", START_TIMEOUT)
    target = Target("litellm", port, {"authorization": f"Bearer {LITELLM_KEY}"}, process.pid)
    return target, process, f"LiteLLM {version} (1 worker, no database)"


def start_portkey(upstream_port: int, work_dir: str) -> tuple[Target, subprocess.Popen[bytes], str]:
    version, hono = portkey_versions()
    port = free_port()
    process = subprocess.Popen(
        ["node", str(PORTKEY_PACKAGE / "build" / "start-server.js"), f"--port={port}", "--headless"],
        env=peer_environment() | {"NODE_ENV": "production"}, cwd=work_dir, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for_port(port, process, "Portkey gateway", START_TIMEOUT)
    headers = {
        "authorization": f"Bearer {UPSTREAM_TOKEN}",
        "x-portkey-provider": "openai",
        "x-portkey-custom-host": f"http://127.0.0.1:{upstream_port}/v1",
    }
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    return (
        Target("portkey", port, headers, process.pid),
        process,
        (f"Portkey gateway {version} (node {node}, @hono/node-server {hono})"),
    )


@dataclass(frozen=True)
class Peer:
    installed: Callable[[], bool]
    install: Callable[[], None]
    start: Callable[[int, str], tuple[Target, subprocess.Popen[bytes], str]]


PEERS = {
    "litellm": Peer(lambda: litellm_version() == LITELLM_VERSION, install_litellm, start_litellm),
    "portkey": Peer(
        lambda: portkey_versions() == (PORTKEY_VERSION, HONO_NODE_SERVER), install_portkey, start_portkey
    ),
}


# --- the rounds -----------------------------------------------------------------------------------


async def send_batch(target: Target, request: bytes, clients: int, count: int) -> list[Sample]:
    """`clients` clients, each with its connection, send `count` requests in all, one after another."""
    samples: list[Sample] = []

    async def client(share: int) -> None:
        connection = Connection(target.port)
        try:
            for _ in range(share):
                samples.append(await connection.send(request))
        finally:
            await connection.close()

    each, extra = divmod(count, clients)
    await asyncio.gather(*(client(each + (i < extra)) for i in range(clients)))
    return samples


async def closed_loop(target: Target, request: bytes, clients: int, seconds: float) -> list[Sample]:
    """`clients` clients, each sending its next request as soon as one ends, for `seconds`."""
    samples: list[Sample] = []
    deadline = time.perf_counter() + seconds

    async def client() -> None:
        connection = Connection(target.port)
        try:
            while time.perf_counter() < deadline:
                samples.append(await connection.send(request))
        finally:
            await connection.close()

    await asyncio.gather(*(client() for _ in range(clients)))
    return samples


def take_turn(target: Target, cell: Cell, send: Callable[[], Coroutine[Any, Any, list[Sample]]]) -> None:
    """One target's turn: its samples, time and CPU seconds added to the cell."""
    (own, database), started = target.cpu_seconds(), time.perf_counter()
    cell.samples += uvloop.run(send())
    cell.elapsed_s += time.perf_counter() - started
    own_after, database_after = target.cpu_seconds()
    cell.cpu_s += own_after - own
    # A server process that ended during the turn takes its time with it: a lower bound.
    cell.database_cpu_s += max(0.0, database_after - database)


def rotated(targets: list[Target], turn: int) -> list[Target]:
    shift = turn % len(targets)
    return targets[shift:] + targets[:shift]


def run_levels(args: argparse.Namespace, targets: list[Target]) -> None:
    for concurrency in args.concurrency:
        for stream in (False, True):
            count = max(args.requests, 10 * concurrency if not args.smoke else 0)
            per_round = max(concurrency, count // args.rounds)
            for turn in range(args.rounds):
                for target in rotated(targets, turn):
                    request = target.request(stream=stream)
                    batch = partial(send_batch, target, request, concurrency, per_round)
                    take_turn(target, target.cell((concurrency, stream)), batch)
            print_level(targets, concurrency, stream)


def run_sustained(args: argparse.Namespace, targets: list[Target]) -> None:
    for turn in range(args.rounds):
        for target in rotated(targets, turn):
            target.sustained = target.sustained or Cell()
            request = target.request(stream=False)
            loop = partial(closed_loop, target, request, SUSTAIN_CONCURRENCY, args.sustain / args.rounds)
            take_turn(target, target.sustained, loop)


def check_answers(targets: list[Target]) -> str:
    """Marks every answer whose text differs from the direct one's; returns the summary line."""
    references = {
        stream: answer_text(next(s for s in cell.good()))
        for (_, stream), cell in targets[0].cells.items()
        if cell.good()
    }
    checked = wrong = 0
    for target in targets:
        for cell in [*target.cells.values(), *([target.sustained] if target.sustained else [])]:
            cell.wrong = 0
            for sample in cell.good():
                stream = sample.headers.get("content-type", "").startswith("text/event-stream")
                checked += 1
                if answer_text(sample) != references.get(stream, ""):
                    cell.wrong += 1
                    wrong += 1
    return f"answers: {checked} checked against the direct answer's text, {wrong} differ"


# --- figures --------------------------------------------------------------------------------------


def is_ours(target: Target) -> bool:
    return target.name.startswith("ours")


def ours(targets: list[Target]) -> Target:
    """The first of our variants: the others' ratios are to it."""
    return next(t for t in targets if is_ours(t))


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base else "-"


def print_level(targets: list[Target], concurrency: int, stream: bool) -> None:
    mode = "stream" if stream else "whole"
    direct = targets[0].cells[(concurrency, stream)].good()
    direct_ttft = p50_p99([s.ttft_ms for s in direct]) if direct else (0.0, 0.0)
    direct_total = p50_p99([s.total_ms for s in direct]) if direct else (0.0, 0.0)
    ours_cpu = ours(targets).cells[(concurrency, stream)].cpu_ms_per_request
    for target in targets:
        cell = target.cells[(concurrency, stream)]
        good = cell.good()
        ttft = p50_p99([s.ttft_ms for s in good]) if good else (float("nan"),) * 2
        total = p50_p99([s.total_ms for s in good]) if good else (float("nan"),) * 2
        if target is targets[0]:
            times = f"{ttft[0]:>7.1f} /{ttft[1]:>7.1f}  {total[0]:>7.1f} /{total[1]:>7.1f} "
        else:
            times = (
                f"{ttft[0] - direct_ttft[0]:>+7.1f} /{ttft[1] - direct_ttft[1]:>+7.1f}  "
                f"{total[0] - direct_total[0]:>+7.1f} /{total[1] - direct_total[1]:>+7.1f} "
            )
        cpu = (
            f"{cell.cpu_ms_per_request:>8.2f} {ratio(cell.cpu_ms_per_request, ours_cpu):>7}"
            if target.pid
            else f"{'-':>8} {'-':>7}"
        )
        print(
            f"{concurrency:>4} {mode:>6} {target.name:>8} {len(cell.samples):>5} {times}{cpu} "
            f"{cell.errors:>6}{cell.database_note()}"
        )


def print_level_header() -> None:
    print(
        f"{'conc':>4} {'mode':>6} {'target':>8} {'n':>5} {'TTFT p50 / p99':>16}  {'total p50 / p99':>16} "
        f"{'CPU ms':>8} {'x ours':>7} {'errors':>6}"
    )
    print(f"{'':>27}(direct: ms; others: added ms)          per request")


def print_sustained(args: argparse.Namespace, targets: list[Target]) -> None:
    base = ours(targets).sustained or Cell()
    base_rate = len(base.good()) / base.elapsed_s if base.elapsed_s else 0.0
    print(
        f"sustained, {SUSTAIN_CONCURRENCY} clients, whole answers, {args.sustain:g} s per target "
        f"in {args.rounds} rounds:"
    )
    print(
        f"{'target':>8} {'req/s':>7} {'x ours':>7} {'total p50 / p99':>16} {'CPU ms/req':>10} "
        f"{'x ours':>7} {'errors':>6}"
    )
    for target in targets:
        cell = target.sustained or Cell()
        good = cell.good()
        rate = len(good) / cell.elapsed_s if cell.elapsed_s else 0.0
        total = p50_p99([s.total_ms for s in good]) if good else (float("nan"),) * 2
        cpu = (
            f"{cell.cpu_ms_per_request:>10.2f} {ratio(cell.cpu_ms_per_request, base.cpu_ms_per_request):>7}"
            if target.pid
            else f"{'-':>10} {'-':>7}"
        )
        print(
            f"{target.name:>8} {rate:>7.0f} {ratio(rate, base_rate):>7} {total[0]:>7.1f} /{total[1]:>7.1f} "
            f"{cpu} {cell.errors:>6}{cell.database_note()}"
        )


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


# --- the run --------------------------------------------------------------------------------------


def wanted_peers(args: argparse.Namespace) -> list[str]:
    """The peers to run: installed first when missing, unless told not to (then skipped)."""
    chosen = []
    for name in args.peers:
        peer = PEERS[name]
        if not peer.installed():
            if args.no_install:
                print(f"{name}: not installed in {PEERS_DIR}, skipped (--no-install / --smoke)")
                continue
            peer.install()
        chosen.append(name)
    return chosen


def warm_up(args: argparse.Namespace, targets: list[Target]) -> list[Sample]:
    """Code paths, connections, the ledgers' rows: sent first, not counted (ours' are checked)."""
    ours_samples: list[Sample] = []
    for target in targets:
        for stream in (False, True):
            samples = uvloop.run(send_batch(target, target.request(stream=stream), 4, args.warm_up))
            if is_ours(target):
                ours_samples += samples
    return ours_samples


def measure(args: argparse.Namespace, targets: list[Target], versions: list[str]) -> None:
    warmed = warm_up(args, targets)
    print_level_header()
    run_levels(args, targets)
    run_sustained(args, targets)
    print_sustained(args, targets)
    answers = check_answers(targets)
    print(f"load average after: {load_average()}")
    print("versions: " + "; ".join(versions))
    print(answers)
    ours_samples = list(warmed)
    for target in filter(is_ours, targets):
        ours_samples += [s for cell in target.cells.values() for s in cell.samples]
        ours_samples += (target.sustained or Cell()).samples
    check_records([s for s in ours_samples if "x-playground-request-id" in s.headers], len(ours_samples))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profile", choices=["embedded", "services"], default="embedded")
    parser.add_argument("--peers", nargs="*", choices=list(PEERS), default=list(PEERS))
    parser.add_argument(
        "--web-processes", type=int, nargs="+", default=[1], help="ours with each count of web processes"
    )
    parser.add_argument(
        "--servers", nargs="+", choices=list(SERVERS), default=["uvicorn"], help="ours under each"
    )
    parser.add_argument("--no-install", action="store_true", help="skip peers not installed")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument(
        "--requests", type=int, default=40, help="per target, level and mode (at least 10 per client)"
    )
    parser.add_argument("--rounds", type=int, default=4, help="turns each target takes per level")
    parser.add_argument("--sustain", type=float, default=15.0, help="seconds of closed loop per target")
    parser.add_argument("--warm-up", type=int, default=16, help="requests per target and mode, not counted")
    add_upstream_arguments(parser)
    parser.add_argument("--smoke", action="store_true", help="seconds: few requests, installed peers only")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE, no_install=True)

    peer_names = wanted_peers(args)
    profile = choose_profile(args.profile == "services")
    data_dir = app_environment("gateway-peers-")
    work_dir = tempfile.mkdtemp(prefix="gateway-peers-work-")
    upstream_port, upstream = start_upstream(args.ttft_ms, args.chunks, args.every_ms)
    processes: list[subprocess.Popen[bytes]] = [upstream]
    try:
        with bench_database(profile):
            secret, _ = prepare_app(f"http://127.0.0.1:{upstream_port}")
            targets = [Target("direct", upstream_port, {"authorization": f"Bearer {UPSTREAM_TOKEN}"})]
            versions = [f"ours {git_revision()} ({profile.name})"]
            ours_variants = variants(args)
            for server_name, count in ours_variants:
                target, process = start_ours(server_name, count, secret, profile, len(ours_variants) > 1)
                processes.append(process)
                targets.append(target)
                versions.append(f"{target.name}: {server_version(server_name)}, {count} web process(es)")
            for name in peer_names:
                target, process, version = PEERS[name].start(upstream_port, work_dir)
                processes.append(process)
                targets.append(target)
                versions.append(version)
            print(
                f"gateway peers, {profile.name}: upstream TTFT {args.ttft_ms:g} ms, streams of "
                f"{args.chunks} chunks every {args.every_ms:g} ms, {args.rounds} rounds; "
                f"load average before: {load_average()}",
                flush=True,
            )
            measure(args, targets, versions)
            for process in reversed(processes[1:]):
                stop(process)
    finally:
        for process in reversed(processes):
            stop(process)
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(work_dir, ignore_errors=True)


def variants(args: argparse.Namespace) -> list[tuple[str, int]]:
    """Ours under each server with each count of web processes."""
    return [(server, count) for server in args.servers for count in args.web_processes]


def start_ours(
    server_name: str, count: int, secret: str, profile: Profile, named: bool
) -> tuple[Target, subprocess.Popen[bytes]]:
    """Our app under `server_name` with `count` web processes (sharing one port, as a reverse proxy
    in front of `make run-production`'s processes spreads the connections); `named`: its variant in
    its name ("ours-u2": uvicorn, two processes)."""
    port = free_port()
    process = subprocess.Popen(web_command(port, "", count, server_name), cwd=ROOT, env=os.environ.copy())
    wait_for_port(port, process, f"app server ({server_name})")
    name = f"ours-{SERVERS[server_name]}{count}" if named else "ours"
    database = profile.database_url.rsplit("/", 1)[-1] if profile.database_url else ""
    return Target(name, port, {"authorization": f"Bearer {secret}"}, process.pid, database=database), process


def server_version(name: str) -> str:
    package = name.partition("-")[0]
    return f"{name} {importlib.metadata.version(package)}"


def git_revision() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()
