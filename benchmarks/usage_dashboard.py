"""Usage dashboard at scale: every chart and fragment and the request log over 7, 30 and 90 days.

    .venv/bin/python benchmarks/usage_dashboard.py                      # PostgreSQL, 10 M + 1 M rows
    .venv/bin/python benchmarks/usage_dashboard.py --rows 1000000 --database sqlite
    .venv/bin/python benchmarks/usage_dashboard.py --smoke   # seconds, SQLite: the test suite runs this

Generates `--rows` usage records for one team plus a tenth as many over nine other teams
(realistic shapes: a daily cycle over 90 days, conversations whose prompts grow turn by
turn, affinity on for most, cache hits with affinity and mostly misses without, a few
errors, log-normal TTFT and latency; a quarter sent through the gateway by a dozen API keys
on behalf of 20,000 end users, a few heavy, with sessions, tags and metadata), loads them in
bulk (COPY on PostgreSQL), builds the rollups with `rollups_rebuild` and the cache breaks with
`rebuild_cache_breaks`, then times through Django's test client, 20 runs each: every chart
fragment, the conformance, routing, hit-ratio and runway fragments, the headline figures, the log's
first page and a filtered page and their totals rows, the gateway's filters (a key, an end
user, a tag, a session), over 7, 30 and 90 days (p50 / p95), and a CSV export of `--export-rows`
rows in a child process, in each flavour (rows/s, RSS before and at peak). PostgreSQL runs
in its own database (`bench_usage`, dropped afterwards unless `--keep`); SQLite in a
temporary file. The last line is
`dashboard: worst p95 <ms> ms over <N> rows`.

Targets (issue 11): fragment p95 <= 300 ms, log first page <= 150 ms, export >= 100k rows/s
with flat RSS; SQLite at 1 M rows <= 1 s. Issue 40: every chart and fragment <= 150 ms p95 at
10 M rows on PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import datetime as dt
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from decimal import ROUND_HALF_UP, Decimal
from itertools import accumulate
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "bench_usage"
SMOKE = {"rows": 3000, "database": "sqlite", "runs": 2, "export_rows": 1000}  # every path, no figure to trust
RANGES = ("7d", "30d", "90d")
COLUMNS = (
    "request_id", "team_id", "user_id", "connection_id", "model_id", "conversation_id", "path",
    "affinity_key",
    "streamed", "status", "prompt_tokens", "cached_tokens", "completion_tokens", "usage_source",
    "usage_implausible", "price_card_id", "price_label", "input_cost", "cached_input_cost", "output_cost",
    "total_cost",
    "ttft_ms", "latency_ms", "upstream_request_id", "error_code", "error_text", "source", "created_at",
    "api_key_id", "end_user", "session", "tags", "metadata", "trace_id", "preset_version_id",
)  # fmt: skip
PRESET_SHARE = 0.4  # of the app's own conversations, started from one of a preset's PRESET_VERSIONS versions
PRESET_VERSIONS = 30
GATEWAY_SHARE = 0.25  # of the conversations, sent through the gateway (no conversation id there)
END_USERS = 20_000  # the main team's; a tenth for the others
KEYS = 12  # the main team's; two for the others
TAGS = ("prod", "staging", "eu", "us", "checkout", "search", "retry", "beta")
REGIONS = ("eu-west", "us-east")
# The dashboard's fragments beside the charts: (label, URL name).
FRAGMENTS = (
    ("schema conformance", "analytics:conformance"),
    ("routing outcomes", "analytics:routing"),
    ("hit ratio per session and key", "analytics:hit-ratio"),
    ("runway", "analytics:runway"),
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rows", type=int, default=10_000_000, help="rows of the main team (others get a tenth)"
    )
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--export-rows", type=int, default=1_000_000)
    parser.add_argument("--pg-admin-url", default=PG_ADMIN_URL)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument("--db-name", default=BENCH_DB, help="the PostgreSQL database of the run")
    parser.add_argument(
        "--load-only",
        action="store_true",
        help="load the rows and build the rollups, then stop (implies --keep)",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="time a database kept by an earlier --keep run of the same --rows (PostgreSQL): skip loading",
    )
    parser.add_argument("--smoke", action="store_true", help="a few thousand rows on SQLite (seconds)")
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="processes that load the rows and rebuild the cache breaks (PostgreSQL)",
    )
    parser.add_argument(
        "--break-days",
        type=int,
        default=None,
        help="rebuild the cache breaks of the last N days only (default: every day); the replay "
        "runs in Python, hours at 10 M rows",
    )
    parser.add_argument("--export-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    if args.export_child:
        export_child(json.loads(args.export_child))
        return

    sqlite_path = ""
    args.keep = args.keep or args.load_only
    if args.reuse:
        if args.database != "postgres":
            parser.error("--reuse needs --database postgres")
        args.keep = True
        database_url = args.pg_admin_url.rsplit("/", 1)[0] + f"/{args.db_name}"
    elif args.database == "postgres":
        database_url = _pg_create(args.pg_admin_url, args.db_name)
    else:
        sqlite_path = tempfile.mktemp(prefix="bench-usage-", suffix=".sqlite3")
        database_url = f"sqlite:///{sqlite_path}"
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("HTTPS", "false")
    # The production profile refuses to start without shared secrets; a throwaway database
    # makes do with fixed ones.
    for name in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY"):
        os.environ.setdefault(name, f"benchmark-only-{name.lower()}")
    try:
        run(args, database_url)
    finally:
        if args.database == "postgres" and not args.keep:
            _pg_drop(args.pg_admin_url, args.db_name)
        elif sqlite_path and not args.keep:
            for suffix in ("", "-wal", "-shm"):
                Path(sqlite_path + suffix).unlink(missing_ok=True)


def _django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
    import django

    django.setup()


def run(args: argparse.Namespace, database_url: str) -> None:
    _django()
    from benchmarks.schema import database_migrated

    database_migrated()
    if args.reuse:
        world, loaded = kept_world()
        print(f"reusing {args.db_name}: {loaded:,} usage rows ({_rollup_counts()})")
    else:
        started = time.perf_counter()
        world = make_world(args.rows)
        print(f"setup: {len(world['teams'])} teams, {world['conversations']:,} conversations")
        loaded = load_rows(world, args.rows, args.database, args.workers)
        print(f"loaded {loaded:,} usage rows in {time.perf_counter() - started:.0f} s")

        from playground.usage.rollups import rollups_rebuild
        from playground.usage.session_rollups import session_rollups_rebuild

        t0 = time.perf_counter()
        rollups_rebuild()
        print(f"rollups rebuilt in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        session_rollups_rebuild()
        _analyze(args.database)
        print(f"session rollups rebuilt in {time.perf_counter() - t0:.1f} s ({_rollup_counts()})")
        # Bulk-loaded records bypass the writer, which finds cache breaks: the rebuild does.
        t0 = time.perf_counter()
        days = rebuild_breaks(
            world["team_ids"], args.break_days, args.workers if args.database == "postgres" else 1
        )
        _analyze(args.database)
        seconds = time.perf_counter() - t0
        print(f"cache breaks rebuilt over {days:,} team-days in {seconds:.1f} s ({_break_counts()})")
        if args.load_only:
            return

    worst = time_pages(world, args.runs)
    export_rows = min(args.export_rows, args.rows)
    for flavour in ("spreadsheet", "data"):
        report = export_in_child(database_url, world["owner_id"], world["team_ids"][0], export_rows, flavour)
        print(
            f"csv export for {flavour}: {report['rows']:,} rows in {report['seconds']:.1f} s = "
            f"{report['rows'] / report['seconds']:,.0f} rows/s; "
            f"RSS {report['rss_before_mb']:.0f} MB before, peak {report['rss_peak_mb']:.0f} MB"
        )
    print(f"dashboard: worst p95 {worst:.0f} ms over {loaded} rows")


# --- data -----------------------------------------------------------------------------------


def make_world(rows: int) -> dict[str, Any]:
    from django.contrib.auth.models import User

    from playground.accounts.models import Membership, Role, Team
    from playground.catalog.models import PriceCard
    from playground.chat.models import Conversation
    from playground.providers.models import ProviderConnection
    from playground.usage.api_keys import api_key_issue

    teams = [Team.objects.create(name=f"Bench {i}", slug=f"bench-{i}") for i in range(10)]
    users: dict[int, list[int]] = {}
    connections: dict[int, list[int]] = {}
    keys: dict[int, list[int]] = {}
    end_users: dict[int, int] = {}
    for index, team in enumerate(teams):
        count = 25 if index == 0 else 5
        members = [User.objects.create_user(f"u{index}-{n}") for n in range(count)]  # no password: no hashing
        for n, member in enumerate(members):
            Membership.objects.create(team=team, user=member, role=Role.OWNER if n == 0 else Role.MEMBER)
        users[team.pk] = [m.pk for m in members]
        issued = [
            api_key_issue(team_id=team.pk, name=f"app-{n}", connection_id=None, created_by_id=members[0].pk)
            for n in range(KEYS if index == 0 else 2)
        ]
        keys[team.pk] = [key.pk for key, _ in issued]
        end_users[team.pk] = END_USERS if index == 0 else END_USERS // 10
        connections[team.pk] = [
            ProviderConnection.objects.create(team=team, name=f"{kind} {team.pk}", kind=kind).pk
            for kind in ("workers-ai", "openai-compatible", "engine")
        ]
    cards = {card.model.model_id: card for card in PriceCard.objects.select_related("model")}
    models = [
        ("@cf/moonshotai/kimi-k2.6", 0.45),
        ("@local/smollm2-135m-instruct", 0.2),
        ("@local/gemma-3-270m", 0.05),
        ("@cf/openai/gpt-oss-120b", 0.15),
        ("@cf/meta/llama-3.3-70b-instruct-fp8-fast", 0.1),
        ("@cf/zai-org/glm-4.7-flash", 0.05),
    ]
    # Conversations of ~12 turns on average: one per 12 rows, created in bulk.
    conversation_ids: dict[int, list[int]] = {}
    total_conversations = 0
    for index, team in enumerate(teams):
        wanted = max(1, (rows if index == 0 else rows // 90) // 12)
        ids: list[int] = []
        batch = 10_000
        for start in range(0, wanted, batch):
            made = Conversation.objects.bulk_create(
                Conversation(team=team, user_id=users[team.pk][0], model_id="m", title=f"Session {start + n}")
                for n in range(min(batch, wanted - start))
            )
            ids.extend(c.pk for c in made)
        conversation_ids[team.pk] = ids
        total_conversations += len(ids)
    preset_versions = {team.pk: _preset_versions(team.pk, connections[team.pk][0]) for team in teams}
    return {
        "teams": [t.pk for t in teams],
        "team_ids": [t.pk for t in teams],
        "users": users,
        "connections": connections,
        "cards": {
            model_id: (
                card.pk,
                card.input_per_m,
                card.effective_cached_input_per_m,
                card.output_per_m,
                card.label,
            )
            for model_id, card in cards.items()
        },
        "models": models,
        "conversation_ids": conversation_ids,
        "preset_versions": preset_versions,
        "conversations": total_conversations,
        "owner_id": users[teams[0].pk][0],
        "keys": keys,
        "end_users": end_users,
        "probe": _probe(keys[teams[0].pk][0]),
    }


def _probe(key_id: int) -> dict[str, str]:
    """What the gateway's filters are timed with: the busiest key and end user, a tag and a session."""
    return {"key": str(key_id), "end_user": end_user_name(0), "tag": "checkout"}


def kept_world() -> tuple[dict[str, Any], int]:
    """What the timings need of a database an earlier `--keep` run loaded."""
    from playground.accounts.models import Membership, Role, Team
    from playground.presets.models import PresetVersion
    from playground.usage.models import ApiKey, UsageRecord

    teams = list(Team.objects.filter(slug__startswith="bench-").order_by("pk").values_list("pk", flat=True))
    owner = Membership.objects.get(team_id=teams[0], role=Role.OWNER).user_id
    loaded = UsageRecord.objects.count()
    key = ApiKey.objects.filter(team_id=teams[0]).order_by("pk").values_list("pk", flat=True).first()
    versions = list(
        PresetVersion.objects.filter(preset__team_id=teams[0]).order_by("pk").values_list("pk", flat=True)
    )
    world = {
        "team_ids": teams,
        "owner_id": owner,
        "probe": _probe(key or 0),
        "preset_versions": {teams[0]: versions},
    }
    return world, loaded


E10 = Decimal("1e-10")


def _cost(tokens: int, per_m: Decimal) -> Decimal:
    return (Decimal(tokens) * per_m / 1_000_000).quantize(E10, rounding=ROUND_HALF_UP)


def end_user_name(n: int) -> str:
    return f"eu-{n:05d}@customer.example"


def _preset_versions(team_id: int, connection_id: int) -> list[int]:
    """A preset of the team with PRESET_VERSIONS versions (their setups differ by temperature)."""
    from playground.presets.models import Preset, PresetVersion

    preset = Preset.objects.create(team_id=team_id, name="Support triage")
    versions = PresetVersion.objects.bulk_create(
        PresetVersion(
            preset=preset,
            number=n,
            connection_id=connection_id,
            model_id="@cf/moonshotai/kimi-k2.6",
            setup={"parameters": {"temperature": n / PRESET_VERSIONS}},
        )
        for n in range(1, PRESET_VERSIONS + 1)
    )
    return [version.pk for version in versions]


def generate(
    world: dict[str, Any], team_id: int, rows: int, seed: int, first: int = 0
) -> Iterator[tuple[Any, ...]]:
    """Conversations of growing prompts spread over 90 days with a daily cycle; a quarter of
    them sent through the gateway (drawn from a generator of their own, so the rest of the
    data is what it was before the gateway)."""
    rng = random.Random(seed)
    sent = random.Random(seed + 1000)  # the gateway's choices
    presets = random.Random(seed + 2000)  # the preset versions', so the rest is what it was
    keys = world["keys"][team_id]
    end_user_weights = list(accumulate(1 / (n + 1) ** 0.9 for n in range(world["end_users"][team_id])))
    now = dt.datetime.now(dt.UTC)
    models, weights = zip(*world["models"], strict=True)
    users = world["users"][team_id]
    user_weights = [1 / (i + 1) for i in range(len(users))]  # a few heavy users
    connections = world["connections"][team_id]
    conversations = world["conversation_ids"][team_id]
    made = 0
    while made < rows:
        conversation = rng.choice(conversations)
        turns = min(rows - made, max(1, int(rng.expovariate(1 / 12))))
        model = rng.choices(models, weights)[0]
        card = world["cards"].get(model)
        user = rng.choices(users, user_weights)[0]
        connection = rng.choice(connections)
        affinity = rng.random() < 0.7
        path = "batch" if rng.random() < 0.1 else "chat"
        attribution: tuple[Any, ...] = (None, "", "", "", None)
        if sent.random() < GATEWAY_SHARE:
            path = "gateway"
            n = bisect.bisect(end_user_weights, sent.random() * end_user_weights[-1])
            tags = sent.sample(TAGS, sent.randint(0, 3))
            attribution = (
                keys[n % len(keys)],  # each end user uses one key (one application)
                end_user_name(n) if sent.random() < 0.9 else "",
                f"sess-{conversation}",
                f",{','.join(tags)}," if tags else "",
                json.dumps({"order_id": sent.randint(1, 10**6), "region": sent.choice(REGIONS)}),
            )
        version = (
            presets.choice(world["preset_versions"][team_id]) if presets.random() < PRESET_SHARE else None
        )
        if path == "gateway":
            version = None
        day = rng.random() * 90
        hour = rng.gauss(14, 4) % 24
        at = now - dt.timedelta(days=day) + dt.timedelta(hours=hour - now.hour)
        if at > now:
            at -= dt.timedelta(days=1)
        base = rng.randint(300, 4000)
        growth = rng.randint(150, 1200)
        for turn in range(turns):
            prompt = base + growth * turn
            cached: int | None
            if rng.random() < 0.05:
                cached = None
            elif turn == 0:
                cached = 0
            elif affinity:
                cached = int((prompt - growth) * rng.uniform(0.85, 1.0))
            else:
                cached = int((prompt - growth) * rng.uniform(0, 0.4)) if rng.random() < 0.3 else 0
            completion = int(rng.lognormvariate(5.5, 0.7))
            roll = rng.random()
            status = (
                "ok"
                if roll < 0.96
                else (
                    "upstream_error" if roll < 0.98 else ("timeout" if roll < 0.99 else "client_disconnected")
                )
            )
            hit = bool(cached)
            ttft = int(rng.lognormvariate(5.6 if hit else 6.5, 0.45))
            latency = ttft + int(completion * rng.uniform(8, 25))
            if card is not None:
                _, input_pm, cached_pm, output_pm, price_label = card
                input_cost = _cost(prompt - (cached or 0), input_pm)
                cached_cost = _cost(cached or 0, cached_pm)
                output_cost = _cost(completion, output_pm)
                card_id: int | None = card[0]
            else:
                input_cost = cached_cost = output_cost = Decimal(0)
                card_id, price_label = None, ""
            yield (
                uuid.UUID(int=rng.getrandbits(128), version=4),
                team_id,
                user,
                connection,
                model,
                conversation if path == "chat" else None,
                path,
                f"conv-{conversation}" if affinity else "",
                True,
                status,
                prompt,
                cached,
                completion,
                "provider",
                False,
                card_id,
                price_label,
                input_cost,
                cached_cost,
                output_cost,
                input_cost + cached_cost + output_cost,
                ttft,
                latency,
                f"ray-{rng.getrandbits(48):012x}",
                "" if status == "ok" else status,
                "" if status == "ok" else "Upstream said no",
                f"batch-item:{team_id}{first + made:09d}:1" if path == "batch" else "",
                at + dt.timedelta(minutes=turn * rng.uniform(0.5, 6)),
                *attribution,
                f"{sent.getrandbits(128):032x}" if path == "gateway" else "",
                version,
            )
            made += 1


def load_rows(world: dict[str, Any], rows: int, database: str, workers: int = 1) -> int:
    from django.db import connection

    plan = [(world["team_ids"][0], rows)] + [(team, rows // 90) for team in world["team_ids"][1:]]
    if database == "sqlite":
        return _sqlite_load(world, plan)
    rebuild = _pg_drop_indexes()
    total = _pg_copy_parallel(world, plan, workers)
    t0 = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        for statement in rebuild:
            cursor.execute(statement)
    print(f"  {len(rebuild)} indexes and constraints built in {time.perf_counter() - t0:.0f} s")
    return total


def _sqlite_load(world: dict[str, Any], plan: list[tuple[int, int]]) -> int:
    from django.db import connection

    marks = ", ".join(["?"] * len(COLUMNS))
    sql = f"INSERT INTO usage_usagerecord ({', '.join(COLUMNS)}) VALUES ({marks})"
    connection.ensure_connection()
    raw_connection = connection.connection
    raw_connection.execute("PRAGMA synchronous = OFF")
    for seed, (team_id, count) in enumerate(plan):
        batch: list[tuple[Any, ...]] = []
        for row in generate(world, team_id, count, seed):
            batch.append(_sqlite_row(row))
            if len(batch) == 20_000:
                _sqlite_insert(raw_connection, sql, batch)
                batch.clear()
        if batch:
            _sqlite_insert(raw_connection, sql, batch)
    return sum(count for _, count in plan)


def _pg_copy_parallel(world: dict[str, Any], plan: list[tuple[int, int]], workers: int) -> int:
    """COPY the plan's rows in `workers` processes, each with its own connection: generating the
    rows in Python is most of a load's time, and PostgreSQL takes COPY streams side by side.
    The main team's rows are split in `workers` parts, each from a seed of its own."""
    from django.db import connection

    connection.close()  # the children connect on their own; nothing is shared across fork
    parts: list[tuple[int, int, int, int]] = []  # (team, rows, seed, the first row's number)
    for seed, (team_id, count) in enumerate(plan):
        shares = workers if seed == 0 else 1
        sizes = [count // shares + (n < count % shares) for n in range(shares)]
        parts += [(team_id, size, seed + 100 * n, sum(sizes[:n])) for n, size in enumerate(sizes)]
    t0 = time.perf_counter()
    if workers == 1:
        done = [_pg_copy_part(world, part) for part in parts]
    else:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(workers) as pool:
            done = pool.starmap(_pg_copy_part, [(world, part) for part in parts])
    total = sum(done)
    print(f"  {total:,} rows copied by {workers} process(es) in {time.perf_counter() - t0:.0f} s")
    return total


def _pg_copy_part(world: dict[str, Any], part: tuple[int, int, int, int]) -> int:
    import psycopg

    team_id, count, seed, first = part
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("SET synchronous_commit = off")
        # A bulk load: the foreign keys were just made and hold, so their per-row trigger
        # checks are skipped; the indexes are built once afterwards.
        conn.execute("SET session_replication_role = replica")
        copy_in = f"COPY usage_usagerecord ({', '.join(COLUMNS)}) FROM STDIN"
        with conn.cursor() as cursor, cursor.copy(copy_in) as copy:
            for row in generate(world, team_id, count, seed, first):
                copy.write_row(row)
    return count


def _pg_drop_indexes() -> list[str]:
    """Drop the records' secondary indexes and unique constraints; return the SQL that rebuilds them.

    Maintaining a dozen indexes row by row is most of a bulk load's time; building each once
    after the load is the usual way (PostgreSQL docs, "Populating a Database").
    """
    from django.db import connection

    table = "usage_usagerecord"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = %s::regclass AND contype = 'u'",
            [table],
        )
        constraints = cursor.fetchall()
        cursor.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.tablename = %s AND NOT EXISTS "
            "(SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname AND c.conrelid = %s::regclass)",
            [table, table],
        )
        indexes = cursor.fetchall()
        for name, _ in constraints:
            cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
    return [
        f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}' for name, definition in constraints
    ] + [definition for _, definition in indexes]


def _sqlite_insert(raw_connection: Any, sql: str, batch: list[tuple[Any, ...]]) -> None:
    # Django's SQLite connection is in autocommit mode: one transaction per batch, not per row.
    raw_connection.execute("BEGIN")
    raw_connection.executemany(sql, batch)
    raw_connection.execute("COMMIT")


def _sqlite_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    out = []
    for value in row:
        if isinstance(value, uuid.UUID):
            out.append(value.hex)
        elif isinstance(value, Decimal):
            out.append(str(value))
        elif isinstance(value, dt.datetime):
            out.append(value.astimezone(dt.UTC).replace(tzinfo=None).isoformat(" "))
        else:
            out.append(value)
    return tuple(out)


def rebuild_breaks(teams: list[int], last_days: int | None, workers: int) -> int:
    """`rebuild_cache_breaks`, day by day in `workers` processes (each day is its own transaction
    and reads only records), for the last `last_days` days or all; returns the team-days done."""
    from django.db import connection

    from playground.usage.insights.cache_break_store import days_to_rebuild

    since = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=last_days) if last_days is not None else None
    days = [(team, day) for team in teams for day in days_to_rebuild(team_id=team, since=since)]
    if workers == 1:
        for team, day in days:
            _breaks_of_day(team, day)
        return len(days)
    import multiprocessing

    connection.close()  # each child opens its own
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.starmap(_breaks_of_day, days, chunksize=1)
    return len(days)


def _breaks_of_day(team: int, day: dt.date) -> int:
    from playground.usage.insights.cache_break_store import cache_breaks_rebuild

    return cache_breaks_rebuild(team_id=team, day=day)


def _analyze(database: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _break_counts() -> str:
    from playground.usage.models import UsageCacheBreak, UsageCacheBreakHourly

    breaks, hours = UsageCacheBreak.objects.count(), UsageCacheBreakHourly.objects.count()
    return f"{breaks:,} breaks, {hours:,} hourly rows"


def _rollup_counts() -> str:
    from playground.usage.rollups import ROLLUP_MODELS
    from playground.usage.session_rollups import SESSION_ROLLUPS

    return ", ".join(
        f"{model.__name__} {model.objects.count():,}" for model in (*ROLLUP_MODELS, *SESSION_ROLLUPS)
    )


# --- timing -------------------------------------------------------------------------------------


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def time_pages(world: dict[str, Any], runs: int) -> float:
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    from playground.analytics.views import CHARTS

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    client = Client()
    client.force_login(User.objects.get(pk=world["owner_id"]))
    team = world["team_ids"][0]
    targets: list[tuple[str, str, dict[str, Any]]] = []
    for name in CHARTS:
        targets.append((f"chart {name}", reverse("analytics:chart", args=[name]), {}))
    targets.append(("chart cost by user", reverse("analytics:chart", args=["cost"]), {"group": "user"}))
    # The dashboard's other fragments (issue 40): every one of them is timed.
    for label, name in FRAGMENTS:
        targets.append((label, reverse(name), {}))
    targets.append(("headline figures", reverse("analytics:headline"), {}))
    targets.append(("log first page", reverse("analytics:log"), {}))
    narrow = {"status": "upstream_error", "model": "@cf/openai/gpt-oss-120b", "affinity": "on"}
    targets.append(("log filtered", reverse("analytics:log"), narrow))
    targets.append(("log totals", reverse("analytics:log-totals"), {}))
    targets.append(("log totals filtered", reverse("analytics:log-totals"), narrow))
    # The gateway's filters: a key or an end user reads the rollups by key (the dashboard and the
    # log's totals); the log's pages walk the records' (team, key | end user | session) indexes.
    probe = world["probe"]
    key, end_user = {"key": probe["key"]}, {"end_user": probe["end_user"]}
    by_end_user, by_key = (
        reverse("analytics:chart", args=[name]) for name in ("cost-by-end-user", "cost-by-key")
    )
    targets.append(("chart cost by end user, key", by_end_user, key))
    targets.append(("chart cost by key, end user", by_key, end_user))
    targets.append(("headline figures, key", reverse("analytics:headline"), key))
    targets.append(("log key", reverse("analytics:log"), key))
    targets.append(("log end user", reverse("analytics:log"), end_user))
    targets.append(("log tag", reverse("analytics:log"), {"tag": probe["tag"]}))
    targets.append(("log session", reverse("analytics:log"), {"session": _a_session(team)}))
    targets.append(("log totals key", reverse("analytics:log-totals"), key))
    targets.append(("log totals end user", reverse("analytics:log-totals"), end_user))
    # A preset version: the log walks the records' (team, preset_version_id) index, and its
    # totals sum that version's records of the period.
    version = {"preset_version": str(world["preset_versions"][team][0])}
    targets.append(("log preset version", reverse("analytics:log"), version))
    targets.append(("log totals preset version", reverse("analytics:log-totals"), version))
    print(f"{'what':32} {'range':>5} {'p50 ms':>8} {'p95 ms':>8}")
    worst = _time_targets(client, team, targets, runs)
    # Not among the pages the issue times, shown so the slow case is on record: a chart
    # filtered by one user reads the full-key rollup.
    print("beyond the targets (not in the worst figure):")
    one_user = {"user": str(world["owner_id"])}
    beyond = [
        ("chart ttft, one user", reverse("analytics:chart", args=["ttft"]), one_user),
        # No rollup holds tags: the totals of one tag read the period's records.
        ("log totals tag", reverse("analytics:log-totals"), {"tag": probe["tag"]}),
    ]
    _time_targets(client, team, beyond, runs)
    return worst


def _a_session(team: int) -> str:
    """A session of the team's gateway requests (a conversation's dozen turns)."""
    from playground.usage.models import UsageRecord

    sessions = UsageRecord.objects.filter(team_id=team, path="gateway").exclude(session="")
    return sessions.values_list("session", flat=True).first() or "none"


def _time_targets(client: Any, team: int, targets: list[tuple[str, str, dict[str, Any]]], runs: int) -> float:
    worst = 0.0
    for label, url, extra in targets:
        for preset in RANGES:
            params = {"team": team, "range": preset, **extra}
            timings = []
            for _ in range(runs):
                t0 = time.perf_counter()
                response = client.get(url, params)
                timings.append((time.perf_counter() - t0) * 1000)
                assert response.status_code == 200, (label, response.status_code)
            p50, p95 = statistics.median(timings), _quantile(timings, 0.95)
            worst = max(worst, p95)
            print(f"{label:32} {preset:>5} {p50:8.1f} {p95:8.1f}")
    return worst


def export_in_child(
    database_url: str, owner_id: int, team_id: int, rows: int, flavour: str
) -> dict[str, Any]:
    spec = json.dumps({"owner_id": owner_id, "team_id": team_id, "rows": rows, "flavour": flavour})
    env = {**os.environ, "DATABASE_URL": database_url}
    output = subprocess.run(
        [sys.executable, __file__, "--export-child", spec],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def _memory_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (peak) of this process.

    Not getrusage's ru_maxrss: Linux carries it across exec, so a child started by a large
    parent reported the parent's size as its peak (104-167 MB against 82 MB measured alone).
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return 0.0


def export_child(spec: dict[str, Any]) -> None:
    """Stream the CSV export of the main team's 90 days and stop after `rows` rows."""
    _django()
    from django.contrib.auth.models import User
    from django.http import QueryDict

    from playground.analytics.exports import csv_stream
    from playground.analytics.filters import filters_from_query

    query = QueryDict(mutable=True)
    query.update({"team": str(spec["team_id"]), "range": "90d"})
    filters = filters_from_query(user=User.objects.get(pk=spec["owner_id"]), query=query)
    assert filters is not None
    rss_before = _memory_mb("VmRSS")

    async def consume() -> int:
        lines = 0
        stream = csv_stream(filters, flavour=spec["flavour"])
        async for block in stream:
            lines += block.count(b"\n")
            if lines > spec["rows"]:
                await stream.aclose()
                break
        return lines - 1  # the header

    t0 = time.perf_counter()
    exported = asyncio.run(consume())
    seconds = time.perf_counter() - t0
    peak = _memory_mb("VmHWM")
    print(
        json.dumps({"rows": exported, "seconds": seconds, "rss_before_mb": rss_before, "rss_peak_mb": peak})
    )


# --- PostgreSQL database of its own -----------------------------------------------------------------


def _pg_create(admin_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return admin_url.rsplit("/", 1)[0] + f"/{name}"


def _pg_drop(admin_url: str, name: str) -> None:
    import psycopg
    from django.db import connections

    connections.close_all()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
