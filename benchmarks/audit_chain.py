"""What the hash chains of decision records (issue 37) cost: an audit write, and the sealer of
routing decisions.

Times `--writes` audit events written as the app writes them (`teams.services.audit.audit`:
lock the team's chain head, hash, insert, move the head), each in its own transaction, against
the same events inserted as before the chain (one INSERT), interleaved so both see the same
database; then `chain_verify` over the chain. Then `--decisions` routed records (each with a
routing detail as the gateway writes it, two attempts), sealed by the beat's sealer
(`usage.routing_seals.routing_seal_sweep`) in its batches, and `routing_chain_verify` over them;
the gateway's request path is not touched by either (the records are written before and apart).
SQLite in a temporary file, or PostgreSQL in a database of its own (`bench_audit_chain`,
dropped afterwards) on the server of `--pg`.

    .venv/bin/python benchmarks/audit_chain.py [--writes 2000] [--decisions 20000]
    .venv/bin/python benchmarks/audit_chain.py --pg postgres://postgres@127.0.0.1:5432/postgres
    .venv/bin/python benchmarks/audit_chain.py --smoke   # seconds: the test suite runs this

The last lines: `audit chain <database>: +<ms> ms per audit write (p50 <ms> chained vs <ms>
plain, p99 ...), verify <ms> ms per 1,000 entries` and `routing seals <database>: <n>
decisions sealed per second (<n> in <s> s, <n> per CPU second of this process, batches of
<n>), verify <n> decisions per second`: the wall time waits for a core on a loaded machine, the
process's CPU time does not (on PostgreSQL the server's own work is not in it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DB = "bench_audit_chain"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--decisions", type=int, default=20000)
    parser.add_argument("--pg", help="an admin URL of a PostgreSQL server: measure there instead of SQLite")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.writes, args.decisions = 100, 300
    data_dir = ""
    if args.pg:
        import psycopg

        with psycopg.connect(args.pg, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB}")
            conn.execute(f"CREATE DATABASE {BENCH_DB}")
        os.environ["DATABASE_URL"] = args.pg.rsplit("/", 1)[0] + f"/{BENCH_DB}"
    else:
        # The app's own SQLite settings (WAL, synchronous=NORMAL) in a folder of its own.
        data_dir = tempfile.mkdtemp(prefix="bench-audit-")
        os.environ["PLAYGROUND_DATA_DIR"] = data_dir
        os.environ.pop("DATABASE_URL", None)
    for name in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY"):
        os.environ.setdefault(name, f"benchmark-only-{name.lower()}")
    os.environ.setdefault("HTTPS", "false")
    os.environ["DJANGO_SETTINGS_MODULE"] = "playground.settings"
    try:
        database = "postgresql" if args.pg else "sqlite"
        measure(args.writes, database)
        measure_seals(args.decisions, database)
    finally:
        if args.pg:
            import psycopg
            from django.db import connections

            connections.close_all()
            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        if data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)


def measure(writes: int, database: str) -> None:
    import django

    django.setup()
    from benchmarks.schema import database_migrated

    database_migrated()
    from playground.accounts.chain import chain_verify
    from playground.accounts.models import AuditAction, AuditEvent, Team
    from playground.routing.chain import DECISION_KINDS
    from playground.teams.services.audit import audit

    chained_team = Team.objects.create(name="Chained", slug="chained")
    plain_team = Team.objects.create(name="Plain", slug="plain")
    chained: list[float] = []
    plain: list[float] = []
    for index in range(writes):
        detail: dict[str, Any] = {"limit": f"{index}.00", "previous": {"limit": f"{index - 1}.00"}}
        started = time.perf_counter()
        audit(actor=None, team=chained_team, action=AuditAction.BUDGET_CHANGED, actor_name="bench", **detail)
        chained.append(time.perf_counter() - started)
        started = time.perf_counter()
        AuditEvent.objects.create(
            team=plain_team, actor_name="bench", action=AuditAction.BUDGET_CHANGED, detail=detail
        )
        plain.append(time.perf_counter() - started)
    started = time.perf_counter()
    status = chain_verify(team_id=chained_team.pk, kinds=DECISION_KINDS)
    verify_ms = (time.perf_counter() - started) * 1000
    assert status.intact and status.entries == writes, str(status)

    def ms(values: list[float], share: float) -> float:
        return statistics.quantiles(values, n=100)[int(share * 100) - 1] * 1000

    added = (statistics.median(chained) - statistics.median(plain)) * 1000
    print(f"{writes} audit writes each, one transaction each, {database}")
    print(
        f"audit chain {database}: {added:+.2f} ms per audit write (p50 {ms(chained, 0.5):.2f} ms chained vs "
        f"{ms(plain, 0.5):.2f} plain, p99 {ms(chained, 0.99):.2f} vs {ms(plain, 0.99):.2f}), "
        f"verify {verify_ms / writes * 1000:.0f} ms per 1,000 entries"
    )


def measure_seals(decisions: int, database: str) -> None:
    """Seal `decisions` routed records written five minutes ago, then verify them all."""
    import datetime as dt

    from django.conf import settings
    from django.utils import timezone

    from playground.accounts.models import Team
    from playground.usage.models import RequestPath, UsageRecord, UsageStatus
    from playground.usage.routing_seals import routing_chain_verify, routing_seal_sweep

    team = Team.objects.create(name="Routed", slug="routed")
    detail = {
        "rule": "cheap-first",
        "attempt": 2,
        "attempts": [
            {"target": "Primary/kimi", "status": 504, "ms": 30_000, "moved_on": "upstream_timeout"},
            {"target": "Backup/kimi", "status": None, "ms": 900, "moved_on": ""},
        ],
        "final": "Backup/kimi",
        "policy_version": 3,
    }
    for start in range(0, decisions, 2000):
        UsageRecord.objects.bulk_create(
            UsageRecord(
                team=team,
                model_id="@cf/moonshotai/kimi-k2.5",
                status=UsageStatus.OK,
                path=RequestPath.GATEWAY,
                route_rule="cheap-first",
                route_fell_back=True,
                routing={**detail, "attempt": index % 3},
            )
            for index in range(start, min(start + 2000, decisions))
        )
    UsageRecord.objects.filter(team=team).update(created_at=timezone.now() - dt.timedelta(minutes=5))
    started, cpu = time.perf_counter(), time.process_time()
    sealed, finished = routing_seal_sweep()
    seal_s, seal_cpu = time.perf_counter() - started, time.process_time() - cpu
    assert finished and sealed == decisions, (sealed, finished)
    started = time.perf_counter()
    report = routing_chain_verify(team_id=team.pk)
    verify_s = time.perf_counter() - started
    assert report.intact and report.checked == decisions, str(report)
    print(
        f"routing seals {database}: {decisions / seal_s:,.0f} decisions sealed per second "
        f"({decisions:,} in {seal_s:.2f} s, {decisions / seal_cpu:,.0f} per CPU second of this process, "
        f"batches of {settings.ROUTING_SEAL_BATCH:,}), "
        f"verify {decisions / verify_s:,.0f} decisions per second"
    )


if __name__ == "__main__":
    main()
