"""What finding cache breaks when a record is written adds to the record writer (issue 40).

Writes records through the one writer (`usage_record_create`) into the first team of a database
(the dashboard benchmark's kept one: its records make the session look-up realistic), in
sessions of a conversation, a gateway session and an affinity key, each turn once with the
break search and once without it (the same writer with `cache_breaks_settle` left out),
interleaved (which goes first alternates), and prints per kind of record the writer's time with
and without it, p50, and the difference. Kinds: no cached count (no look-up: `may_break` says
no), intact (the previous prompt came back cached: the look-up, no break), broken (the look-up,
a break row and its hour's upsert). The records it wrote are deleted afterwards.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_usage_breaks \\
        .venv/bin/python benchmarks/cache_break_settle.py [--turns 200]
    .venv/bin/python benchmarks/cache_break_settle.py --smoke   # seconds, SQLite: the test suite runs this
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=200, help="records per kind and variant")
    parser.add_argument("--smoke", action="store_true", help="a few turns on a new SQLite file (seconds)")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
    for name in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY"):
        os.environ.setdefault(name, f"benchmark-only-{name.lower()}")
    with tempfile.TemporaryDirectory() as scratch:
        if args.smoke:
            os.environ["DATABASE_URL"] = f"sqlite:///{scratch}/settle.sqlite3"
            args.turns = 4
        run(args.turns, smoke=args.smoke)


def run(turns: int, *, smoke: bool) -> None:
    import django

    django.setup()
    from benchmarks.schema import database_migrated
    from playground.accounts.models import Membership, Team
    from playground.usage.models import UsageRecord

    if smoke:
        database_migrated()
        Team.objects.create(name="Smoke", slug="smoke")
    team = Team.objects.order_by("pk").first()
    assert team is not None, "no team: run the dashboard benchmark with --keep first"
    user_id = Membership.objects.filter(team=team).values_list("user_id", flat=True).first()
    first_id = (UsageRecord.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
    try:
        print(f"{'record':14} {'sessions':>10} {'with ms':>8} {'without':>8} {'added µs':>9}")
        for kind, cached_share in (("no count", None), ("intact", 1.0), ("broken", 0.0)):
            for session in ("conversation", "session", "affinity"):
                with_it, without = _timed(team.pk, user_id, session, cached_share, turns)
                added = (statistics.median(with_it) - statistics.median(without)) * 1000
                print(
                    f"{kind:14} {session:>10} {statistics.median(with_it):8.2f} "
                    f"{statistics.median(without):8.2f} {added:9.0f}"
                )
    finally:
        UsageRecord.objects.filter(pk__gte=first_id, team=team).delete()


def _timed(
    team_id: int, user_id: int | None, session: str, cached_share: float | None, turns: int
) -> tuple[list[float], list[float]]:
    from playground.catalog.seed import KIMI_K25
    from playground.providers.usage_normalize import NormalizedUsage
    from playground.usage import records as writer
    from playground.usage.calls.context import Attribution, RequestContext
    from playground.usage.insights.cache_break_store import cache_breaks_settle
    from playground.usage.metering import Outcome
    from playground.usage.models import UsageSource, UsageStatus

    timings: dict[bool, list[float]] = {True: [], False: []}
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Benchmark."}]
    prompt = 1000
    for turn in range(turns):
        messages.append({"role": "user", "content": f"turn {turn}"})
        for searched in (True, False) if turn % 2 else (False, True):
            name = f"settle-{session}-{cached_share}-{searched}"
            context = RequestContext(
                team_id=team_id,
                user_id=user_id,
                connection_id=None,
                model_id=KIMI_K25,
                conversation_id=10**12 + hash(name) % 10**6 if session == "conversation" else None,
                attribution=Attribution(session=name if session == "session" else ""),
                affinity_key=name if session == "affinity" else "",
                request_body={"model": KIMI_K25, "messages": messages},
            )
            outcome = Outcome(
                status=UsageStatus.OK,
                usage=NormalizedUsage(
                    prompt_tokens=prompt,
                    completion_tokens=5,
                    cached_tokens=None if cached_share is None else int((prompt - 100) * cached_share),
                ),
                usage_source=UsageSource.PROVIDER,
                ttft_ms=100,
                latency_ms=200,
            )
            settle = cache_breaks_settle if searched else (lambda records: [])
            with mock.patch.object(writer, "cache_breaks_settle", settle):
                t0 = time.perf_counter()
                writer.usage_record_create(context=context, outcome=outcome)
                timings[searched].append((time.perf_counter() - t0) * 1000)
        messages.append({"role": "assistant", "content": "ok"})
        prompt += 100
    return timings[True], timings[False]


if __name__ == "__main__":
    main()
