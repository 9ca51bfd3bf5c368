"""How well the cache-break detector finds real breaks: a labelled corpus on the embedded engine.

Each session is a conversation with the engine's default model (SmolLM2), sent with
`x-session-affinity`, with its own system prompt (a unique first line, so no session shares
a prefix with another), three tools and 3-6 user turns of greedy 8-token answers. One
cause is injected at a session's last turn, or none (an intact session: every turn only
appends). The causes:
- model_changed: the last turn goes to the other model (Gemma);
- tools_changed: the tools list reordered (half the sessions) or one tool's description edited;
- system_changed: one word of the system prompt changed;
- history_changed: an earlier user message edited after its first words (which turn is
  picked at random);
- affinity_missing: the last turn sent without `x-session-affinity`;
- affinity_changed: sent with another key;
- evicted: before the last turn, filler requests on the same replica push the session's
  prefix out of the replica's (deliberately small) cache.
Truth: an injected cause is a break, except that a request without affinity or with a new
key that still lands on the replica of the turn before (the engine's `x-engine-replica`
header says) kept its cache and is no break. Every other turn after the first is intact and
must not be called a break.

The detector sees what a usage record holds (the body as sent, prompt and cached tokens, the
model and the affinity key) and nothing of the injection. It prints, per cause, the true
breaks, those found with the right cause, those missed (or found with another cause), and
false breaks (found where there was none), then recall and the false-break share.
Target: recall >= 95 %, false breaks <= 5 % of what it reports.

    .venv/bin/python benchmarks/cache_breaks.py [--sessions 240] [--seed 7]
    .venv/bin/python benchmarks/cache_breaks.py --smoke   # seconds: the test suite runs this
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")

import django  # noqa: E402

django.setup()

from playground.usage.insights.cache_breaks import Cause, SessionRequest, session_breaks  # noqa: E402
from playground.usage.prefix_digest import prefix_digest  # noqa: E402
from tests.support.engine import GEMMA, MODEL_ID, start_engine  # noqa: E402

INJECTED = [cause for cause in Cause if cause != Cause.OTHER]  # `other` is a missing body: none here
ANSWER_TOKENS = 8
# Small enough that a handful of fillers evict a session; large enough for a session's own turns.
PREFIX_CACHE_BYTES = 24 * 1024 * 1024
FILLERS = 6
TOPICS = ["invoices", "shipping", "refunds", "accounts", "passwords", "warranty", "returns", "discounts"]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        },
    }
    for name, description in (
        ("order_lookup", "Look up an order by its id and return its status and items."),
        ("refund_issue", "Issue a refund for an order id once the customer has confirmed it."),
        ("ticket_open", "Open a support ticket for the customer with a short summary."),
    )
]


def system_prompt(session: int, word: str = "politely") -> str:
    topic = TOPICS[session % len(TOPICS)]
    return (
        f"Session {session:04d} of the {topic} desk. You are a support assistant for Acme. Answer {word} "
        f"and briefly. Customers ask about {topic}; use the tools when an order id is given. "
        "Never invent order numbers, never promise dates, and always end with a question. "
        + " ".join(f"Rule {n}: {topic} cases older than {n + 2} weeks go to a supervisor." for n in range(6))
    )


def question(session: int, turn: int) -> str:
    topic = TOPICS[(session + turn) % len(TOPICS)]
    return (
        f"Question {turn} of customer {session}: I have a problem with my {topic} for order "
        f"A-{1000 + 7 * session + turn}. It started {turn + 1} days ago and I would like to know what "
        "to do next."
    )


@dataclass
class Session:
    number: int
    turns: int
    cause: Cause | None
    tools: list[dict[str, Any]] = field(default_factory=lambda: [dict(tool) for tool in TOOLS])
    messages: list[dict[str, Any]] = field(default_factory=list)
    requests: list[SessionRequest] = field(default_factory=list)
    replicas: list[str] = field(default_factory=list)


class Corpus:
    def __init__(self, client: httpx.Client, url: str, headers: dict[str, str], rng: random.Random) -> None:
        self.client, self.url, self.headers, self.rng = client, url, headers, rng
        self.record_id = 0

    def send(self, session: Session, body: dict[str, Any], affinity: str | None) -> str:
        headers = dict(self.headers)
        if affinity is not None:
            headers["x-session-affinity"] = affinity
        response = self.client.post(self.url, json=body, headers=headers)
        response.raise_for_status()
        answer = response.json()
        usage = answer["usage"]
        self.record_id += 1
        session.requests.append(
            SessionRequest(
                record_id=self.record_id,
                model_id=body["model"],
                digest=prefix_digest(body),
                affinity_key=affinity or "",
                prompt_tokens=usage["prompt_tokens"],
                cached_tokens=(usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0),
                succeeded=True,
            )
        )
        session.replicas.append(f"{body['model']}#{response.headers['x-engine-replica']}")
        return str(answer["choices"][0]["message"].get("content") or "")

    def fillers(self, affinity: str) -> None:
        """Unique long prompts on the session's replica, until its prefix cache has turned over."""
        for _ in range(FILLERS):
            text = " ".join(question(10_000 + self.rng.randrange(10**6), n) for n in range(8))
            body = {"model": MODEL_ID, "messages": [{"role": "user", "content": text}], "max_tokens": 1}
            headers = {**self.headers, "x-session-affinity": affinity}
            self.client.post(self.url, json=body, headers=headers).raise_for_status()

    def run(self, session: Session) -> None:
        affinity: str = f"bench-session-{session.number}"
        key: str | None
        system = system_prompt(session.number)
        for turn in range(1, session.turns + 1):
            last = turn == session.turns
            cause = session.cause if last else None
            model, key = MODEL_ID, affinity
            if cause == Cause.MODEL_CHANGED:
                model = GEMMA
            elif cause == Cause.TOOLS_CHANGED:
                if session.number % 2:
                    session.tools = session.tools[1:] + session.tools[:1]
                else:
                    edited = dict(session.tools[1]["function"], description="Refund an order (changed).")
                    session.tools[1] = {"type": "function", "function": edited}
            elif cause == Cause.SYSTEM_CHANGED:
                system = system_prompt(session.number, word="kindly")
            elif cause == Cause.HISTORY_CHANGED:
                users = [i for i, message in enumerate(session.messages) if message["role"] == "user"]
                index = self.rng.choice(users)
                edited = session.messages[index]["content"].replace(
                    "I have a problem", "I have an urgent problem"
                )
                session.messages[index] = {"role": "user", "content": edited}
            elif cause == Cause.AFFINITY_MISSING:
                key = None
            elif cause == Cause.AFFINITY_CHANGED:
                key = f"{affinity}-moved"
            elif cause == Cause.EVICTED:
                self.fillers(affinity)
            session.messages.append({"role": "user", "content": question(session.number, turn)})
            body = {
                "model": model,
                "messages": [{"role": "system", "content": system}, *session.messages],
                "tools": session.tools,
                "max_tokens": ANSWER_TOKENS,
                "temperature": 0,
            }
            answer = self.send(session, body, key)
            session.messages.append({"role": "assistant", "content": answer})


def truth(session: Session) -> dict[int, Cause]:
    """The true break of the session, by request id: its injected cause at the last turn."""
    if session.cause is None:
        return {}
    last = session.requests[-1]
    moved = session.replicas[-1] != session.replicas[-2]
    if session.cause in (Cause.AFFINITY_MISSING, Cause.AFFINITY_CHANGED) and not moved:
        return {}  # landed where its prefix was: nothing lost
    return {last.record_id: session.cause}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=240)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="one session per cause and one intact")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    count = len(INJECTED) + 1 if args.smoke else args.sessions
    plan: list[Cause | None] = [None, *INJECTED]
    sessions = [
        Session(n, turns=3 if args.smoke else rng.randint(3, 6), cause=plan[n % len(plan)])
        for n in range(count)
    ]

    started = time.monotonic()
    with tempfile.TemporaryDirectory() as workdir:
        env = {"ENGINE_PREFIX_CACHE_BYTES": str(PREFIX_CACHE_BYTES)}
        if not args.smoke:  # requests go one at a time: the replica answering may use every core
            env["ENGINE_THREADS"] = str(os.cpu_count() or 1)  # (not beside the suite's other smoke runs)
        engine = start_engine(Path(workdir), replicas=2, gemma_replicas=1, env=env)
        try:
            with httpx.Client(timeout=120) as client:
                corpus = Corpus(
                    client,
                    f"{engine.url}/client/v4/accounts/bench/ai/v1/chat/completions",
                    engine.headers,
                    rng,
                )
                for done, session in enumerate(sessions, 1):
                    corpus.run(session)
                    if done % 20 == 0:
                        print(f"  {done} of {count} sessions sent", file=sys.stderr, flush=True)
        finally:
            engine.stop()
    elapsed = time.monotonic() - started

    rows: dict[str, Counter[str]] = {cause: Counter() for cause in [*INJECTED, "none"]}
    harmless = Counter[str]()
    reported = 0
    for session in sessions:
        expected = truth(session)
        found = {b.record_id: b for b in session_breaks(f"s{session.number}", session.requests)}
        reported += len(found)
        if session.cause is not None and not expected:
            harmless[session.cause] += 1
        for record_id, cause in expected.items():
            rows[cause]["true"] += 1
            hit = found.get(record_id)
            rows[cause]["found" if hit is not None and hit.cause == cause else "missed"] += 1
        for record_id, hit in found.items():
            if record_id not in expected:
                rows[hit.cause]["false"] += 1
    intact_turns = sum(len(s.requests) - 1 for s in sessions) - sum(r["true"] for r in rows.values())

    requests = sum(len(s.requests) for s in sessions)
    print(f"{count} sessions, {requests} requests on the engine in {elapsed:.0f} s")
    print(f"{'cause':<18} {'true':>5} {'found':>6} {'missed':>7} {'false':>6}")
    for name, row in rows.items():
        print(f"{name:<18} {row['true']:>5} {row['found']:>6} {row['missed']:>7} {row['false']:>6}")
    true, found_right = sum(r["true"] for r in rows.values()), sum(r["found"] for r in rows.values())
    false = sum(r["false"] for r in rows.values())
    if harmless:
        print(
            "injected but harmless (same replica as the turn before): "
            + ", ".join(f"{c} {n}" for c, n in harmless.items())
        )
    print(f"intact turns judged: {intact_turns}")
    recall = 100 * found_right / true if true else 0.0
    false_share = 100 * false / reported if reported else 0.0
    verdict = "PASS" if recall >= 95 and false_share <= 5 else "MISSED"
    print(
        f"cache breaks: recall {recall:.1f} % ({found_right} of {true}), false breaks {false_share:.1f} % "
        f"({false} of {reported} reported) {verdict}"
    )


if __name__ == "__main__":
    main()
