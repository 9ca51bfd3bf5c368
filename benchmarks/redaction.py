"""How fast the redactor reads prompt text (`playground.lib.redaction`), on one core.

Two corpora of 20 KB prompts, made from a fixed seed: "typical" (prose, code, a JSON snippet,
a table of figures, dates and times, about one entity per kilobyte) and "dense" (every line
holds an e-mail address, a phone number, a card, an IBAN, an IP address or a key). Each prompt
is a chat body (a system prompt and four messages), redacted as the record writer does: a new
`Redaction` (salt) per body, every string in it. Throughput is the prompt text read per second
of one thread (MB/s per core); the added time is each body's, p50 and p99.

Targets (issue 37): >= 20 MB/s of prompt text per core, p99 <= 2 ms for a 20 KB prompt.

    .venv/bin/python benchmarks/redaction.py [--prompts 400] [--seed 7]
    .venv/bin/python benchmarks/redaction.py --smoke   # seconds: the test suite runs this
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playground.lib.redaction import Redaction  # noqa: E402

PROMPT_BYTES = 20 * 1024
TARGET_MB_S = 20.0
TARGET_P99_MS = 2.0
WORDS = [
    *("the", "invoice", "order", "customer", "refund", "shipping", "account", "warranty", "return"),
    *("policy", "please", "check", "status", "delivery", "address", "team", "model", "request"),
    *("answer", "token", "budget", "cost", "report", "quarter", "revenue", "growth", "summary"),
    *("table", "figure", "section", "review", "draft", "email", "phone", "number", "call", "meeting"),
]
CODE = """def total(items: list[dict[str, float]]) -> float:
    return sum(item["price"] * item["qty"] for item in items if item.get("qty", 0) > 0)

for i in range(10):  # std::vector<int> v; v[1:3]; x = {"a": 1, "b": [1, 2, 3]}
    print(f"{i:>4} {i * 3.14159:.2f}")
"""
JSON_SNIPPET = (
    '{"id": 81723, "created": "2026-11-27T10:31:07Z", "amount": 1249.50, "currency": "EUR", "ok": true}'
)


def _entities(rng: random.Random) -> list[str]:
    n = rng.randrange(10**6)
    return [
        f"user{n}@example.com",
        f"+44 20 7946 {n % 10000:04d}",
        f"(415) 555-{n % 10000:04d}",
        "4111 1111 1111 1111",
        "DE89 3704 0044 0532 0130 00",
        f"10.{n % 256}.{n // 256 % 256}.7",
        f"2001:db8::{n % 65536:x}",
        f"sk-proj-{n:024d}abcd",
        f"pgk_{n:032d}",
    ]


def _prose(rng: random.Random, size: int) -> str:
    words = []
    length = 0
    while length < size:
        word = rng.choice(WORDS)
        if rng.random() < 0.05:
            word = str(rng.choice((2024, 2025, 17, 3, 250, 1999.99, "12:30", "2026-01-15", "v1.2.3")))
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def _table(rng: random.Random) -> str:
    rows = ["| month | orders | revenue |", "|---|---|---|"]
    rows += [
        f"| {month} | {rng.randrange(10_000)} | {rng.randrange(10**7) / 100:.2f} |" for month in range(1, 13)
    ]
    return "\n".join(rows)


def prompt_text(rng: random.Random, *, dense: bool) -> str:
    """About PROMPT_BYTES of prompt text."""
    parts: list[str] = []
    size = 0
    while size < PROMPT_BYTES:
        if dense:
            part = f"{_prose(rng, 60)} {rng.choice(_entities(rng))}."
        else:
            kind = rng.choices(("prose", "code", "json", "table"), weights=(16, 2, 1, 1))[0]
            part = _prose(rng, 900) if kind == "prose" else CODE if kind == "code" else JSON_SNIPPET
            part = _table(rng) if kind == "table" else part
            if rng.random() < 0.2:  # about one value in 4 KB
                part += f" {rng.choice(_entities(rng))}"
        parts.append(part)
        size += len(part) + 1
    return "\n".join(parts)[:PROMPT_BYTES]


def chat_body(text: str) -> dict[str, Any]:
    """`text` as a chat body: a system prompt and four messages."""
    cut = len(text) // 5
    pieces = [text[i * cut : (i + 1) * cut if i < 4 else len(text)] for i in range(5)]
    roles = ("system", "user", "assistant", "user", "assistant")
    return {
        "model": "bench",
        "messages": [{"role": role, "content": piece} for role, piece in zip(roles, pieces, strict=True)],
    }


def measure(bodies: list[dict[str, Any]], *, label: str) -> tuple[float, float]:
    """Redact each body once with a fresh redaction; print and return (MB/s, p99 ms)."""
    times = []
    found = 0
    for body in bodies:
        redaction = Redaction()
        started = time.perf_counter()
        redaction.value(body)
        times.append(time.perf_counter() - started)
        found += sum(redaction.counts.values())
    mb = sum(len(m["content"].encode()) for body in bodies for m in body["messages"]) / 1e6
    rate = mb / sum(times)
    p50, p99 = statistics.median(times) * 1000, statistics.quantiles(times, n=100)[98] * 1000
    print(
        f"{label:<8} {len(bodies):>5} prompts of {PROMPT_BYTES // 1024} KB: {rate:6.1f} MB/s per core, "
        f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, {found / len(bodies):.0f} values replaced per prompt"
    )
    return rate, p99


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=400, help="prompts per corpus")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="a few prompts: the test suite runs this")
    args = parser.parse_args()
    count = 20 if args.smoke else args.prompts
    rng = random.Random(args.seed)
    measure([chat_body(prompt_text(rng, dense=False)) for _ in range(5)], label="warm-up")
    typical = measure([chat_body(prompt_text(rng, dense=False)) for _ in range(count)], label="typical")
    dense = measure([chat_body(prompt_text(rng, dense=True)) for _ in range(count)], label="dense")
    rate, p99 = typical
    print(
        f"redaction: typical {rate:.1f} MB/s per core (target >= {TARGET_MB_S:.0f}) "
        f"{'PASS' if rate >= TARGET_MB_S else 'MISS'}, p99 {p99:.2f} ms per 20 KB prompt "
        f"(target <= {TARGET_P99_MS:.0f}) {'PASS' if p99 <= TARGET_P99_MS else 'MISS'}; "
        f"dense {dense[0]:.1f} MB/s, p99 {dense[1]:.2f} ms"
    )


if __name__ == "__main__":
    main()
