"""How fast the redactor reads prompt text (`playground.lib.redaction`), on one core.

Two corpora of 20 KB prompts, made from a fixed seed: "typical" (prose, code, a JSON snippet,
a table of figures, dates and times, about one entity per kilobyte) and "dense" (every line
holds an e-mail address, a phone number, a card, an IBAN, an IP address or a key). Each prompt
is a chat body (a system prompt and four messages), redacted as the record writer does: a new
`Redaction` (salt) per body, every string in it. Throughput is the prompt text read per second
of one thread (MB/s per core); the added time is each body's, p50 and p99.

Target (issue 37): >= 20 MB/s of prompt text per core, p99 <= 2 ms for a 20 KB prompt, for the
typical corpus; the dense one, a stress case of our own, is held to the same bar (PASS/MISS).

    .venv/bin/python benchmarks/redaction.py [--prompts 400] [--seed 7]
    .venv/bin/python benchmarks/redaction.py --against HEAD~3   # before and after, side by side
    .venv/bin/python benchmarks/redaction.py --smoke   # seconds: the test suite runs this

`--against REV` also times the redactor as it was at a git revision, on the same bodies, body by
body in turns with today's (so the machine's load falls on both), and counts the bodies whose
redacted text differs (both with the same salt). `--cpu` times each body by the process's CPU
time instead of the wall clock: on a loaded machine, what the redactor spends, not when it ran.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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


Redactor = Callable[..., Any]  # `Redaction`, today's or a revision's


def redactor_at(revision: str) -> Redactor:
    """`Redaction` as `playground.lib.redaction` was at a git revision: a package of parts (its
    relative imports find the revision's parts), or before that one file."""
    folder = Path(tempfile.mkdtemp()) / "redaction_at_revision"
    folder.mkdir()
    paths = _git("ls-tree", "--name-only", revision, "playground/lib/redaction/").split()
    for path in paths or ["playground/lib/redaction.py"]:
        name = "__init__.py" if path.endswith("redaction.py") else Path(path).name
        (folder / name).write_text(_git("show", f"{revision}:{path}"))
    spec = importlib.util.spec_from_file_location(
        folder.name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and relative imports look their module up
    spec.loader.exec_module(module)
    redactor: Redactor = module.Redaction
    return redactor


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def measure(
    bodies: list[dict[str, Any]],
    *,
    label: str,
    against: Redactor | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, float]:
    """Redact each body once with a fresh redaction (and with `against`'s, in turns); print and
    return today's (MB/s, p99 ms)."""
    redactors: dict[str, Redactor] = {"": Redaction} | ({"before": against} if against else {})
    times: dict[str, list[float]] = {name: [] for name in redactors}
    found = 0
    for i, body in enumerate(bodies):
        for name in sorted(redactors, reverse=bool(i % 2)):  # who goes first alternates
            redaction = redactors[name]()
            started = clock()
            redaction.value(body)
            times[name].append(clock() - started)
            found += sum(redaction.counts.values()) if not name else 0
    mb = sum(len(m["content"].encode()) for body in bodies for m in body["messages"]) / 1e6
    for name in sorted(redactors, reverse=True):
        rate = mb / sum(times[name])
        p50 = statistics.median(times[name]) * 1000
        p99 = statistics.quantiles(times[name], n=100)[98] * 1000
        print(
            f"{label:<8} {name or ('after' if against else ''):<6} {len(bodies):>5} prompts of "
            f"{PROMPT_BYTES // 1024} KB: {rate:6.1f} MB/s per core, p50 {p50:.2f} ms, p99 {p99:.2f} ms"
            + ("" if name else f", {found / len(bodies):.0f} values replaced per prompt")
        )
    if against:
        salt = b"same salt for both"
        differ = sum(Redaction(salt=salt).value(body) != against(salt=salt).value(body) for body in bodies)
        print(f"{label:<8} bodies redacted differently before and after: {differ} of {len(bodies)}")
    return mb / sum(times[""]), statistics.quantiles(times[""], n=100)[98] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=400, help="prompts per corpus")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="a few prompts: the test suite runs this")
    parser.add_argument("--against", metavar="REV", help="also time the redactor at this git revision")
    parser.add_argument(
        "--cpu", action="store_true", help="time by the process's CPU time, not the wall clock"
    )
    args = parser.parse_args()
    count = 20 if args.smoke else args.prompts
    against = redactor_at(args.against) if args.against else None
    timed = functools.partial(
        measure, against=against, clock=time.process_time if args.cpu else time.perf_counter
    )
    rng = random.Random(args.seed)
    timed([chat_body(prompt_text(rng, dense=False)) for _ in range(5)], label="warm-up")
    typical = timed([chat_body(prompt_text(rng, dense=False)) for _ in range(count)], label="typical")
    dense = timed([chat_body(prompt_text(rng, dense=True)) for _ in range(count)], label="dense")
    rate, p99 = typical
    print(
        f"redaction: typical {rate:.1f} MB/s per core (target >= {TARGET_MB_S:.0f}) "
        f"{_verdict(rate >= TARGET_MB_S)}, p99 {p99:.2f} ms per 20 KB prompt "
        f"(target <= {TARGET_P99_MS:.0f}) {_verdict(p99 <= TARGET_P99_MS)}; "
        f"dense {dense[0]:.1f} MB/s, p99 {dense[1]:.2f} ms "
        f"({_verdict(dense[0] >= TARGET_MB_S)}, {_verdict(dense[1] <= TARGET_P99_MS)})"
    )


def _verdict(met: bool) -> str:
    return "PASS" if met else "MISS"


if __name__ == "__main__":
    main()
