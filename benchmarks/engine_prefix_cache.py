"""What session affinity buys on the embedded engine: prefix-cache hits and time to first token.

Two workloads, each run with and without `x-session-affinity` in the same invocation, each
mode on a fresh engine with the default replica count and balance (round-robin), sent to the
engine's default model (SmolLM2 135M Instruct; Gemma's one replica idles beside it):
- agent (default): 8 conversations x 6 turns; each conversation's first message carries
  its own ~1,000-token document (an incident report), as an agent's tool output or an
  attached file would, and later turns ask about it. Nothing is shared between
  conversations, so a turn's prefix is cached only on the replica that served an earlier
  turn of the same conversation.
- support: 8 conversations x 8 turns that share one ~1,000-token system prompt (a support
  handbook), so every replica soon holds the shared part whatever the routing.
`--reference` adds a mode with nothing to reuse (a unique first line per request): what
every turn would cost with no cache.

Two conversations are in flight at once (as two agents working side by side), greedy
decoding, 32 tokens per answer. For turns >= 2 it reports the share of prompt tokens
served from a replica's KV (the engine's measured `cached_tokens`), TTFT p50/p95 (request
sent -> first content token, queueing included), decode tokens/s, and the ratios, plus
each replica's resident memory and threads.
Targets (agent workload): >= 90 % cached with affinity, <= 60 % without, TTFT p50 >= 3x
lower with affinity.

    .venv/bin/python benchmarks/engine_prefix_cache.py [--workload agent|support|both] [--reference]
    .venv/bin/python benchmarks/engine_prefix_cache.py --smoke   # seconds: the test suite runs this
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playground.engine.config import DEFAULT_REPLICAS  # noqa: E402  (needs the repo on sys.path)
from tests.support.engine import EngineProcess, start_engine  # noqa: E402

PRODUCTS = ["kettle", "toaster", "blender", "lamp", "heater", "fan", "scale", "clock", "radio", "mixer"]
REGIONS = ["north", "south", "east", "west"]
# 2 conversations x 2 turns on 2 replicas, 4 tokens per answer: every path, no figure to trust.
SMOKE = {
    "conversations": 2,
    "turns": 2,
    "document_lines": 3,
    "max_tokens": 4,
    "replicas": 2,
    "context_size": 2048,
}
SYSTEMS = ["billing", "search", "checkout", "login", "reports", "uploads", "email", "inventory"]
CAUSES = ["a full disk", "an expired certificate", "a bad deploy", "a slow query", "a DNS change"]
SUPPORT_QUESTIONS = [
    "My {product} arrived with a cracked lid. Order {order}. What should I do?",
    "I live in the {region} region. How long does a replacement {product} take to arrive?",
    "Can I get a refund instead of a replacement for order {order}?",
    "The {product} stopped working after two weeks. Is that covered by the warranty?",
    "Do I need to send the broken {product} back before you ship a new one?",
    "Can you change the delivery address for order {order} to my office?",
    "Is there a cheaper model than the {product} that I could switch to?",
    "Thanks. Please summarise what happens next with order {order}.",
]
AGENT_QUESTIONS = [
    "Read the incident report above. What was the root cause of the {system} outage?",
    "Which entries in the timeline show customer impact?",
    "List the follow-up actions and who owns each.",
    "How long did the {system} outage last from first alert to recovery?",
    "Draft a two-sentence status update for customers.",
    "What should the team change so that this does not happen again?",
]


def support_handbook(rules: int) -> str:
    """A fixed support handbook (36 rules: about 1,000 tokens); identical for every conversation."""
    lines = ["You are the support assistant of Acme Home Appliances. Follow this handbook exactly."]
    for number in range(rules):
        product = PRODUCTS[number % len(PRODUCTS)]
        region = REGIONS[number % len(REGIONS)]
        lines.append(
            f"Rule {number + 1}: a damaged {product} shipped to the {region} region is replaced within "
            f"{2 + number % 5} working days; refunds need the order number and a photo of the damage."
        )
    return "\n".join(lines)


def incident_report(conversation: int, entries: int) -> str:
    """A report of this conversation's own, different from its first line (30 entries: about
    1,000 tokens)."""
    system = SYSTEMS[conversation % len(SYSTEMS)]
    cause = CAUSES[conversation % len(CAUSES)]
    lines = [f"Incident report INC-{4100 + 17 * conversation}: {system} outage caused by {cause}.", ""]
    for minute in range(entries):
        clock = f"{9 + (minute * 7 + conversation) // 60:02d}:{(minute * 7 + conversation) % 60:02d}"
        lines.append(
            f"{clock} on-call engineer {chr(65 + (minute + conversation) % 26)} saw {system} error rate at "
            f"{(minute * 13 + conversation * 7) % 90 + 5} percent; region {REGIONS[minute % 4]} "
            f"affected, {(minute * 31 + conversation) % 400 + 20} customers waiting."
        )
    lines.append(f"Follow-ups: fix {cause} alerting (team {system}); review runbook; add a canary.")
    return "\n".join(lines)


@dataclass(frozen=True)
class Workload:
    name: str
    turns: int
    document_lines: int  # of the handbook or the report
    # (conversation, document lines) -> the messages a conversation starts with
    opening: Callable[[int, int], list[dict[str, str]]]
    # (conversation, turn number, document lines) -> the user's question
    question: Callable[[int, int, int], str]


def _support_question(conversation: int, number: int, document_lines: int) -> str:
    details = {
        "product": PRODUCTS[conversation % len(PRODUCTS)],
        "region": REGIONS[conversation % len(REGIONS)],
        "order": f"A-{7300 + 37 * conversation}",
    }
    return SUPPORT_QUESTIONS[(number - 1) % len(SUPPORT_QUESTIONS)].format(**details)


def _agent_question(conversation: int, number: int) -> str:
    question = AGENT_QUESTIONS[(number - 1) % len(AGENT_QUESTIONS)]
    return question.format(system=SYSTEMS[conversation % len(SYSTEMS)])


WORKLOADS = {
    "agent": Workload(
        "agent: a ~1,000-token document of its own in each conversation's first message",
        turns=6,
        document_lines=30,
        opening=lambda conversation, lines: [],
        question=lambda conversation, number, lines: (
            f"{incident_report(conversation, lines)}\n\n{_agent_question(conversation, number)}"
            if number == 1
            else _agent_question(conversation, number)
        ),
    ),
    "support": Workload(
        "support: one ~1,000-token system prompt shared by every conversation",
        turns=8,
        document_lines=36,
        opening=lambda conversation, lines: [{"role": "system", "content": support_handbook(lines)}],
        question=_support_question,
    ),
}


@dataclass
class Turn:
    conversation: int
    number: int
    replica: str
    ttft: float
    decode_seconds: float
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int


@dataclass
class Mode:
    name: str
    affinity: bool
    unique_prefix: bool = False
    turns: list[Turn] = field(default_factory=list)
    wall_seconds: float = 0.0
    replicas: list[dict[str, Any]] = field(default_factory=list)


async def ask(
    client: httpx.AsyncClient,
    engine: EngineProcess,
    messages: list[dict[str, str]],
    headers: dict[str, str],
    *,
    max_tokens: int,
) -> tuple[str, float, float, dict[str, Any], str]:
    """One streamed request: (answer, TTFT, decode seconds, usage, replica)."""
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True}
    sent = time.perf_counter()
    first = last = 0.0
    parts: list[str] = []
    usage: dict[str, Any] = {}
    async with client.stream("POST", engine.run_url(), json=body, headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            frame = json.loads(line[6:])
            if "usage" in frame:
                usage = frame["usage"]
            for choice in frame.get("choices", []):
                if text := choice["delta"].get("content"):
                    last = time.perf_counter()
                    first = first or last
                    parts.append(text)
        replica = response.headers["x-engine-replica"]
    first = first or time.perf_counter()
    return "".join(parts), first - sent, max(last - first, 0.0), usage, replica


def with_unique_start(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The messages behind a system line of their own, so no replica holds any of their prefix."""
    line = f"Request {uuid.uuid4().hex}."
    if messages[0]["role"] == "system":
        return [{"role": "system", "content": f"{line}\n{messages[0]['content']}"}, *messages[1:]]
    return [{"role": "system", "content": line}, *messages]


async def run_conversation(
    client: httpx.AsyncClient,
    engine: EngineProcess,
    workload: Workload,
    mode: Mode,
    conversation: int,
    args: argparse.Namespace,
) -> None:
    lines = args.document_lines or workload.document_lines
    messages = workload.opening(conversation, lines)
    headers = dict(engine.headers)
    if mode.affinity:
        headers["x-session-affinity"] = f"bench-conversation-{conversation}"
    for number in range(1, (args.turns or workload.turns) + 1):
        messages.append({"role": "user", "content": workload.question(conversation, number, lines)})
        sent = with_unique_start(messages) if mode.unique_prefix else messages
        answer, ttft, decode, usage, replica = await ask(
            client, engine, sent, headers, max_tokens=args.max_tokens
        )
        messages.append({"role": "assistant", "content": answer})
        mode.turns.append(
            Turn(
                conversation=conversation,
                number=number,
                replica=replica,
                ttft=ttft,
                decode_seconds=decode,
                prompt_tokens=usage["prompt_tokens"],
                cached_tokens=usage["prompt_tokens_details"]["cached_tokens"],
                completion_tokens=usage["completion_tokens"],
            )
        )


async def run_mode(engine: EngineProcess, workload: Workload, mode: Mode, args: argparse.Namespace) -> None:
    pending: asyncio.Queue[int] = asyncio.Queue()
    for conversation in range(args.conversations):
        pending.put_nowait(conversation)

    async def worker(client: httpx.AsyncClient) -> None:
        while not pending.empty():
            conversation = pending.get_nowait()
            await run_conversation(client, engine, workload, mode, conversation, args)

    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0)) as client:
        await asyncio.gather(*(worker(client) for _ in range(args.concurrency)))
    mode.wall_seconds = time.perf_counter() - started
    mode.replicas = [
        {
            "index": replica["index"],
            "model": replica["model"].removeprefix("@local/"),
            "rss_mb": resident_mb(replica["pid"]),
            "threads": threads(replica["pid"]),
        }
        for replica in engine.health()["replicas"]
    ]


def _status_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split()[1]
    return "0"


def resident_mb(pid: int) -> float:
    return int(_status_field(pid, "VmRSS")) / 1024


def threads(pid: int) -> int:
    return int(_status_field(pid, "Threads"))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def summarize(mode: Mode) -> dict[str, float]:
    later = [turn for turn in mode.turns if turn.number >= 2]
    ttfts = [turn.ttft for turn in later]
    decoding = [turn for turn in later if turn.decode_seconds > 0 and turn.completion_tokens > 1]
    by_conversation: dict[int, set[str]] = {}
    for turn in mode.turns:
        by_conversation.setdefault(turn.conversation, set()).add(turn.replica)
    return {
        "requests": len(later),
        "prompt": sum(turn.prompt_tokens for turn in later),
        "cached": sum(turn.cached_tokens for turn in later),
        "cached_share": sum(turn.cached_tokens for turn in later) / sum(turn.prompt_tokens for turn in later),
        "hits": sum(1 for turn in later if turn.cached_tokens >= turn.prompt_tokens / 2),
        "ttft_p50": percentile(ttfts, 50),
        "ttft_p95": percentile(ttfts, 95),
        "decode_tps": statistics.fmean((t.completion_tokens - 1) / t.decode_seconds for t in decoding),
        "throughput": sum(turn.completion_tokens for turn in mode.turns) / mode.wall_seconds,
        "multi_replica": sum(1 for replicas in by_conversation.values() if len(replicas) > 1),
        "conversations": len(by_conversation),
        "wall": mode.wall_seconds,
    }


def print_table(mode: Mode, figures: dict[str, float]) -> None:
    print(f"\n== {mode.name} ==")
    spread = f"{figures['multi_replica']:.0f} of {figures['conversations']:.0f}"
    rows = [
        ("requests measured (turns >= 2)", f"{figures['requests']:.0f}"),
        ("prompt tokens / cached tokens", f"{figures['prompt']:.0f} / {figures['cached']:.0f}"),
        ("cached share of prompt tokens", f"{100 * figures['cached_share']:.1f} %"),
        ("requests with half their prompt or more cached", f"{figures['hits']:.0f}"),
        ("TTFT p50", f"{1000 * figures['ttft_p50']:.0f} ms"),
        ("TTFT p95", f"{1000 * figures['ttft_p95']:.0f} ms"),
        ("decode tokens/s (per request, mean)", f"{figures['decode_tps']:.1f}"),
        ("completion tokens/s (all requests / wall time)", f"{figures['throughput']:.1f}"),
        ("conversations served by 2+ replicas", spread),
        ("wall time", f"{figures['wall']:.1f} s"),
    ]
    for label, value in rows:
        print(f"  {label:<48} {value:>14}")
    memory = ", ".join(
        f"#{r['index']} {r['model']} {r['rss_mb']:.0f} MB / {r['threads']} threads" for r in mode.replicas
    )
    print(f"  replicas (RSS / OS threads): {memory}")


def run_workload(workload: Workload, args: argparse.Namespace) -> None:
    print(f"\n##### workload {workload.name}")
    turns = args.turns or workload.turns
    print(f"##### {args.conversations} conversations x {turns} turns, {args.concurrency} in flight, "
          f"{args.replicas} replicas, {os.cpu_count()} CPU cores")  # fmt: skip
    modes = [
        Mode("with affinity (x-session-affinity per conversation)", True),
        Mode("without affinity (round-robin)", False),
    ]
    if args.reference:
        modes.append(Mode("reference: no reusable prefix (a unique first line per request)", False, True))
    results = {}
    for mode in modes:
        with tempfile.TemporaryDirectory() as workdir:
            engine = start_engine(Path(workdir), replicas=args.replicas, context_size=args.context_size)
            try:
                asyncio.run(run_mode(engine, workload, mode, args))
            finally:
                engine.stop()
        results[mode.name] = summarize(mode)
        print_table(mode, results[mode.name])

    on, off = results[modes[0].name], results[modes[1].name]
    p50, p95 = off["ttft_p50"] / on["ttft_p50"], off["ttft_p95"] / on["ttft_p95"]
    print("\n== ratios ==")
    shares = f"{100 * on['cached_share']:.1f} % with affinity, {100 * off['cached_share']:.1f} % without"
    print(f"  cached share: {shares}")
    print(f"  TTFT with affinity vs without: p50 lower by {p50:.1f}x, p95 by {p95:.1f}x")
    print(f"  throughput with affinity / without: {on['throughput'] / off['throughput']:.2f}")
    if args.reference:
        cold = results[modes[2].name]
        print(
            f"  TTFT with affinity vs nothing reusable: p50 lower by {cold['ttft_p50'] / on['ttft_p50']:.1f}x"
        )
    print("\n== targets ==" + (" (a smoke run: too small to judge them)" if args.smoke else ""))
    print(f"  >= 90 % cached with affinity: {'met' if on['cached_share'] >= 0.9 else 'MISSED'}")
    print(f"  <= 60 % cached without: {'met' if off['cached_share'] <= 0.6 else 'MISSED'}")
    print(f"  TTFT p50 >= 3x lower with affinity: {'met' if p50 >= 3 else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=[*WORKLOADS, "both"], default="agent")
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=2, help="conversations in flight at once")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--replicas", type=int, default=DEFAULT_REPLICAS)
    parser.add_argument("--context-size", type=int, default=4096)
    parser.add_argument("--reference", action="store_true", help="add a mode with nothing to reuse")
    parser.add_argument("--turns", type=int, default=0, help="per conversation (default: the workload's)")
    parser.add_argument("--document-lines", type=int, default=0, help="of the shared or own document")
    parser.add_argument("--smoke", action="store_true", help="a tiny run of every path (seconds)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    for name in WORKLOADS if args.workload == "both" else [args.workload]:
        run_workload(WORKLOADS[name], args)


if __name__ == "__main__":
    main()
