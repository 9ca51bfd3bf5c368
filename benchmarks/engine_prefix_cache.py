"""What session affinity buys on the embedded engine: prefix-cache hits and time to first token.

8 conversations x 8 turns share one ~1,000-token system prompt (a support handbook) and
run a few at a time against a 2-replica engine, in three modes, each on a fresh engine:
- with affinity: every request carries `x-session-affinity: <conversation id>`;
- without: no header, so the engine's least-loaded routing (ties rotate) places each
  request, and a conversation's turns land on whichever replica is free;
- a reference with nothing to reuse: no header, and every request starts with a line of its
  own, so no replica holds any of its prefix (what every turn would cost with no cache).
All modes send the same conversations with greedy decoding and the same settings. By
default two conversations are in flight at once, one per replica, so TTFT measures the
prompt's evaluation rather than waiting behind another request. For turns >= 2 it
reports the share of prompt tokens served from the replica's KV cache (the engine's
measured `cached_tokens`), TTFT p50/p95 (request sent -> first content token, queueing
included) and decode tokens/s, then the ratios.
Targets: >= 90 % cached with affinity, clearly less without, TTFT p50 >= 5x lower.

    .venv/bin/python benchmarks/engine_prefix_cache.py [--concurrency 2] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.engine import EngineProcess, start_engine  # noqa: E402  (needs the repo on sys.path)

PRODUCTS = ["kettle", "toaster", "blender", "lamp", "heater", "fan", "scale", "clock", "radio", "mixer"]
REGIONS = ["north", "south", "east", "west"]
QUESTIONS = [
    "My {product} arrived with a cracked lid. Order {order}. What should I do?",
    "I live in the {region} region. How long does a replacement {product} take to arrive?",
    "Can I get a refund instead of a replacement for order {order}?",
    "The {product} stopped working after two weeks. Is that covered by the warranty?",
    "Do I need to send the broken {product} back before you ship a new one?",
    "Can you change the delivery address for order {order} to my office?",
    "Is there a cheaper model than the {product} that I could switch to?",
    "Thanks. Please summarise what happens next with order {order}.",
]


def system_prompt() -> str:
    """A fixed support handbook of about 1,000 tokens; identical for every conversation."""
    lines = ["You are the support assistant of Acme Home Appliances. Follow this handbook exactly."]
    for number in range(36):
        product = PRODUCTS[number % len(PRODUCTS)]
        region = REGIONS[number % len(REGIONS)]
        lines.append(
            f"Rule {number + 1}: a damaged {product} shipped to the {region} region is replaced within "
            f"{2 + number % 5} working days; refunds need the order number and a photo of the damage."
        )
    return "\n".join(lines)


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


async def run_conversation(
    client: httpx.AsyncClient,
    engine: EngineProcess,
    mode: Mode,
    conversation: int,
    turns: int,
    max_tokens: int,
) -> None:
    messages = [{"role": "system", "content": system_prompt()}]
    headers = dict(engine.headers)
    if mode.affinity:
        headers["x-session-affinity"] = f"bench-conversation-{conversation}"
    details = {
        "product": PRODUCTS[conversation % len(PRODUCTS)],
        "region": REGIONS[conversation % len(REGIONS)],
        "order": f"A-{7300 + 37 * conversation}",
    }
    for number in range(1, turns + 1):
        if mode.unique_prefix:
            messages[0]["content"] = f"Request {uuid.uuid4().hex}.\n{system_prompt()}"
        question = QUESTIONS[(number - 1) % len(QUESTIONS)].format(**details)
        messages.append({"role": "user", "content": question})
        answer, ttft, decode, usage, replica = await ask(
            client, engine, messages, headers, max_tokens=max_tokens
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


async def run_mode(engine: EngineProcess, mode: Mode, args: argparse.Namespace) -> None:
    pending: asyncio.Queue[int] = asyncio.Queue()
    for conversation in range(args.conversations):
        pending.put_nowait(conversation)

    async def worker(client: httpx.AsyncClient) -> None:
        while not pending.empty():
            conversation = pending.get_nowait()
            await run_conversation(client, engine, mode, conversation, args.turns, args.max_tokens)

    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0)) as client:
        await asyncio.gather(*(worker(client) for _ in range(args.concurrency)))
    mode.wall_seconds = time.perf_counter() - started


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
        ("TTFT p50", f"{1000 * figures['ttft_p50']:.0f} ms"),
        ("TTFT p95", f"{1000 * figures['ttft_p95']:.0f} ms"),
        ("decode tokens/s (per request, mean)", f"{figures['decode_tps']:.1f}"),
        ("completion tokens/s (all requests / wall time)", f"{figures['throughput']:.1f}"),
        ("conversations served by 2+ replicas", spread),
        ("wall time", f"{figures['wall']:.1f} s"),
    ]
    for label, value in rows:
        print(f"  {label:<48} {value:>14}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=2, help="conversations in flight at once")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--context-size", type=int, default=4096)
    args = parser.parse_args()

    modes = [
        Mode("with affinity (x-session-affinity per conversation)", True),
        Mode("without affinity", False),
        Mode("reference: no reusable prefix (a unique first line per request)", False, unique_prefix=True),
    ]
    results = {}
    for mode in modes:
        with tempfile.TemporaryDirectory() as workdir:
            engine = start_engine(Path(workdir), replicas=args.replicas, context_size=args.context_size)
            try:
                asyncio.run(run_mode(engine, mode, args))
            finally:
                engine.stop()
        results[mode.name] = summarize(mode)
        print_table(mode, results[mode.name])

    on, off, cold = (results[mode.name] for mode in modes)
    print("\n== ratios ==")
    print(
        f"  cached share: {100 * on['cached_share']:.1f} % with affinity, "
        f"{100 * off['cached_share']:.1f} % without"
    )
    p50, p95 = off["ttft_p50"] / on["ttft_p50"], off["ttft_p95"] / on["ttft_p95"]
    print(f"  TTFT with affinity vs without: p50 lower by {p50:.1f}x, p95 by {p95:.1f}x")
    cold_p50, cold_p95 = cold["ttft_p50"] / on["ttft_p50"], cold["ttft_p95"] / on["ttft_p95"]
    print(f"  TTFT with affinity vs nothing reusable: p50 lower by {cold_p50:.1f}x, p95 by {cold_p95:.1f}x")
    print(f"  throughput with affinity / without: {on['throughput'] / off['throughput']:.2f}")
    print("\n== targets ==")
    print(f"  >= 90 % cached with affinity: {'met' if on['cached_share'] >= 0.9 else 'MISSED'}")
    print(f"  clearly lower without: {'met' if off['cached_share'] < on['cached_share'] - 0.1 else 'MISSED'}")
    print(f"  TTFT p50 >= 5x lower with affinity: {'met' if p50 >= 5 else 'MISSED'}")


if __name__ == "__main__":
    main()
