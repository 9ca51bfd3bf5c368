"""Conversation search at scale: the search box's results over N conversations, SQLite and PostgreSQL.

    .venv/bin/python benchmarks/conversation_search.py                      # SQLite, 800,000 conversations
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/x .venv/bin/python benchmarks/conversation_search.py
                                                    # SQLite, then PostgreSQL (a database of its own)
    .venv/bin/python benchmarks/conversation_search.py --smoke   # seconds: the test suite runs this

Fills `--conversations` conversations (default 800,000, over 180 days, ids in time order as
the app makes them) over ten teams, 80 % in the searching user's main team and 10 % in their
second, with 2 to 6 messages each (questions and answers
drawn from a pool of sentences over a 20,000-word vocabulary with a Zipf law, so "the" is in
almost every conversation), plus planted words of known frequency: one in a single answer of
the user's team (and in one of another team's, which must not be found), others in 0.01 %,
1 % and 10 % of the conversations. Rows go in with COPY (PostgreSQL) or batched
`executemany` in large transactions (SQLite), with the secondary indexes and the search
index dropped and built once afterwards, as a bulk load should (PostgreSQL docs, "Populating
a Database"); the time of each step is printed.

Then it times what the list's search box asks for as the user types (`/chat/?q=…`, the htmx
results fragment: the search, the team scope, the newest 50 and the HTML) through Django's test
client, `--runs` times per query after one warm-up, and prints p50 / p95 per query and
over all. Every database runs in a child process of its own: SQLite in a temporary file,
PostgreSQL in `bench_search` on the server of `DATABASE_URL` (dropped afterwards unless
`--keep`). The last line of each is `search <database>: worst p95 <ms> ms, all queries p50
<ms> ms over <N> conversations`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DB = "bench_search"
SMOKE = {"conversations": 2000, "runs": 3}
TEAMS = 10
SHARES = [0.8, 0.1] + [0.1 / (TEAMS - 2)] * (TEAMS - 2)  # the user is in teams 0 and 1
VOCABULARY = 20_000
SENTENCES = 50_000
COMMON = [  # the most frequent words first: "the" about 1 word in 10
    *("the", "of", "and", "to", "a", "in", "is", "it", "that", "for", "you", "with", "on", "as", "are"),
    *("this", "be", "at", "or", "by", "from", "your", "can", "have", "an", "not", "will", "which", "if"),
    *("more", "when", "use", "what", "so", "about", "how", "there", "one", "all", "also", "each"),
]
# Planted words: (word, share of conversations); "zygomorphic" goes in exactly one answer of the
# user's team (its oldest conversation) and one of another team (its newest): the search must
# find one.
PLANTED = (("quartzite", 0.0001), ("fjord", 0.01), ("lantern", 0.1))
RARE = "zygomorphic"
QUERIES = (
    ("one answer holds it", RARE),
    ("its prefix, as typed", RARE[:7]),
    ("in 0.01 % of conversations", "quartzite"),
    ("in 1 %", "fjord"),
    ("in 10 %", "lantern"),
    ("two words, 1 % and 10 %", "fjord lantern"),
    ("in almost all ('the')", "the"),
    ("in none", "xylophonist"),
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", type=int, default=800_000)
    parser.add_argument("--runs", type=int, default=20, help="timed runs per query")
    parser.add_argument(
        "--database",
        choices=["sqlite", "postgres", "both"],
        help="default: sqlite, and postgres too with DATABASE_URL",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the filled database (PostgreSQL: bench_search; SQLite: var/bench-search.sqlite3)",
    )
    parser.add_argument("--reuse", action="store_true", help="time a database an earlier --keep run filled")
    parser.add_argument("--smoke", action="store_true", help="2,000 conversations, 3 runs (seconds)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    if args.child:
        child(args)
        return
    databases = [args.database] if args.database in ("sqlite", "postgres") else ["sqlite"]
    if args.database == "both" or (
        args.database is None and os.environ.get("DATABASE_URL", "").startswith("postgres")
    ):
        databases = ["sqlite", "postgres"]
    failed = False
    for database in databases:
        failed |= run_child(args, database) != 0
    sys.exit(1 if failed else 0)


def run_child(args: argparse.Namespace, database: str) -> int:
    sqlite_path = str(ROOT / "var" / "bench-search.sqlite3") if args.keep or args.reuse else ""
    if database == "postgres":
        admin = _pg_admin_url()
        url = admin.rsplit("/", 1)[0] + f"/{BENCH_DB}"
        if not args.reuse:
            _pg(admin, f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)", f"CREATE DATABASE {BENCH_DB}")
    else:
        if not sqlite_path:
            sqlite_path = tempfile.mktemp(prefix="bench-search-", suffix=".sqlite3")
        if not args.reuse:
            _sqlite_unlink(sqlite_path)
        url = f"sqlite:///{sqlite_path}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "HTTPS": "false",
        "DJANGO_SETTINGS_MODULE": "playground.settings",
    }
    # The production profile refuses to start without shared secrets; a throwaway database makes do.
    for name in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY"):
        env.setdefault(name, f"benchmark-only-{name.lower()}")
    command = [sys.executable, __file__, "--child", database, "--conversations", str(args.conversations)]
    command += ["--runs", str(args.runs)] + (["--reuse"] if args.reuse else [])
    try:
        return subprocess.run(command, env=env, check=False).returncode
    finally:
        if not (args.keep or args.reuse):
            if database == "postgres":
                _pg(_pg_admin_url(), f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
            else:
                _sqlite_unlink(sqlite_path)


def child(args: argparse.Namespace) -> None:
    import django

    warnings.filterwarnings("ignore", message="No directory at")  # static files are not served here
    django.setup()
    from benchmarks.schema import database_migrated

    database = args.child
    print(f"--- {database}: {args.conversations:,} conversations ---", flush=True)
    if not args.reuse:
        database_migrated()
        user_id = fill(args.conversations)
    else:
        from django.contrib.auth.models import User

        user_id = User.objects.get(username="searcher").pk
    time_queries(user_id, args.runs, args.conversations, database)


# --- the data ---------------------------------------------------------------------------------


def _words(rng: random.Random) -> list[str]:
    """COMMON first, then made-up words of two to four syllables, none of them a planted word."""
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words = list(COMMON)
    seen = set(words) | {word for word, _ in PLANTED} | {RARE, "xylophonist"}
    while len(words) < VOCABULARY:
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def _sentences(rng: random.Random) -> list[str]:
    words = _words(rng)
    # Zipf: "the" about 1 word in 10
    cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(words))))
    pool = []
    for _ in range(SENTENCES):
        picked = rng.choices(words, cum_weights=cumulative, k=rng.randint(6, 16))
        pool.append(" ".join(picked).capitalize() + ".")
    return pool


def fill(conversations: int) -> int:
    """Teams, the searching user, then the conversations and messages in bulk; returns the user's id."""
    from django.contrib.auth.models import User
    from django.db import connection

    from playground.accounts.models import Membership, Role, Team
    from playground.chat.search.index import search_index_drop, search_index_ensure

    teams = [Team.objects.create(name=f"Search {i}", slug=f"search-{i}") for i in range(TEAMS)]
    user = User.objects.create_user("searcher")
    for team in teams[:2]:
        Membership.objects.create(team=team, user=user, role=Role.MEMBER)
    others = [User.objects.create_user(f"other-{i}").pk for i in range(TEAMS)]
    rng = random.Random(26)
    pool = _sentences(rng)
    t0 = time.perf_counter()
    search_index_drop(connection)
    dropped = _indexes_drop() if connection.vendor == "postgresql" else []
    messages = _load(conversations, [t.pk for t in teams], user.pk, others, pool, rng)
    seconds = time.perf_counter() - t0
    print(f"filled {conversations:,} conversations and {messages:,} messages in {seconds:.0f} s", flush=True)
    t0 = time.perf_counter()
    with connection.cursor() as cursor:
        if dropped:
            cursor.execute("SET maintenance_work_mem = '512MB'")
        for statement in dropped:
            cursor.execute(statement)
    if dropped:
        print(f"  {len(dropped)} other indexes built in {time.perf_counter() - t0:.0f} s", flush=True)
    t0 = time.perf_counter()
    built = search_index_ensure(connection)
    print(f"search index built ({', '.join(built)}) in {time.perf_counter() - t0:.0f} s", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return user.pk


def _rows(
    conversations: int,
    team_ids: list[int],
    user_id: int,
    others: list[int],
    pool: list[str],
    rng: random.Random,
) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(conversation, its messages) as column values, ids from 1."""
    now = dt.datetime.now(dt.UTC)
    planted: dict[int, list[str]] = {}
    for word, share in PLANTED:
        for index in rng.sample(range(conversations), max(1, round(share * conversations))):
            planted.setdefault(index, []).append(word)
    # The rare word: once in the user's main team (index 0 is always there), once in another team.
    planted.setdefault(0, []).append(RARE)
    outsider = conversations - 1
    planted.setdefault(outsider, []).append(RARE)
    cumulative = [sum(SHARES[: i + 1]) for i in range(TEAMS)]
    message_id = 0
    for index in range(conversations):
        if index == 0:
            team = 0
        elif index == outsider:
            team = TEAMS - 1
        else:
            team = _team(rng.random(), cumulative)
        author = user_id if team < 2 else others[team]
        # Over 180 days in id order, as conversations are made: the newest hold the highest ids.
        updated = now - dt.timedelta(days=180 * (1 - index / conversations), seconds=rng.random() * 600)
        count = rng.randint(2, 6)
        texts = [" ".join(rng.choice(pool) for _ in range(rng.randint(1, 3))) for _ in range(count)]
        for word in planted.get(index, []):
            answer = rng.randrange(1, count, 2) if count > 1 else 0  # an answer (odd positions)
            texts[answer] += f" The {word} comes up here."
        conversation = {
            "id": index + 1,
            "team_id": team_ids[team],
            "user_id": author,
            "model_id": "@cf/moonshotai/kimi-k2.6",
            "title": texts[0][:80],
            "created_at": updated - dt.timedelta(minutes=count),
            "updated_at": updated,
        }
        messages = []
        for position, text in enumerate(texts):
            message_id += 1
            messages.append(
                {
                    "id": message_id,
                    "conversation_id": index + 1,
                    "role": "user" if position % 2 == 0 else "assistant",
                    "content": text,
                    "created_at": updated - dt.timedelta(minutes=count - position),
                }
            )
        yield conversation, messages


def _team(roll: float, cumulative: list[float]) -> int:
    for team, bound in enumerate(cumulative):
        if roll <= bound:
            return team
    return len(cumulative) - 1


def _columns(model: Any) -> tuple[list[str], dict[str, Any]]:
    """Every column of `model` and the database value of each one's default (a column added later
    with a default needs nothing here)."""
    from django.db import connection

    names, defaults = [], {}
    for field in model._meta.concrete_fields:
        names.append(field.column)
        default = field.get_default() if field.has_default() or not field.null else None
        value = field.get_db_prep_save(default, connection) if default is not None else None
        if (
            connection.vendor == "sqlite"
            and value is not None
            and not isinstance(value, str | int | float | bytes)
        ):
            value = json.dumps(default)
        defaults[field.column] = value
    return names, defaults


def _load(
    conversations: int,
    team_ids: list[int],
    user_id: int,
    others: list[int],
    pool: list[str],
    rng: random.Random,
) -> int:
    from django.db import connection

    from playground.chat.models import Conversation, Message

    conversation_columns, conversation_defaults = _columns(Conversation)
    message_columns, message_defaults = _columns(Message)
    rows = _rows(conversations, team_ids, user_id, others, pool, rng)
    messages = 0
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            raw = cursor.cursor
            raw.execute("SET synchronous_commit = off")
            raw.execute("SET session_replication_role = replica")  # the keys hold: skip their triggers
            batch_c: list[tuple[Any, ...]] = []
            batch_m: list[tuple[Any, ...]] = []
            for conversation, items in rows:
                batch_c.append(
                    tuple({**conversation_defaults, **conversation}[c] for c in conversation_columns)
                )
                batch_m += [tuple({**message_defaults, **item}[c] for c in message_columns) for item in items]
                if len(batch_m) >= 100_000:  # one COPY after the other: a connection runs one at a time
                    messages += _pg_copy(raw, (conversation_columns, message_columns), batch_c, batch_m)
                    batch_c, batch_m = [], []
            messages += _pg_copy(raw, (conversation_columns, message_columns), batch_c, batch_m)
            raw.execute("SET session_replication_role = DEFAULT")
            for table, count in (("chat_conversation", conversations), ("chat_message", messages)):
                raw.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), {count})")
        return messages
    connection.ensure_connection()
    raw_connection = connection.connection
    raw_connection.execute("PRAGMA synchronous = OFF")
    conversation_sql = _insert_sql("chat_conversation", conversation_columns)
    message_sql = _insert_sql("chat_message", message_columns)
    batch_c: list[tuple[Any, ...]] = []
    batch_m: list[tuple[Any, ...]] = []
    for conversation, items in rows:
        batch_c.append(
            tuple(_sqlite_value({**conversation_defaults, **conversation}[c]) for c in conversation_columns)
        )
        batch_m += [
            tuple(_sqlite_value({**message_defaults, **item}[c]) for c in message_columns) for item in items
        ]
        if len(batch_m) >= 50_000:
            messages += _sqlite_insert(raw_connection, conversation_sql, batch_c, message_sql, batch_m)
            batch_c, batch_m = [], []
    messages += _sqlite_insert(raw_connection, conversation_sql, batch_c, message_sql, batch_m)
    return messages


def _pg_copy(
    raw: Any, columns: tuple[list[str], list[str]], conversations: list[Any], messages: list[Any]
) -> int:
    """COPY a batch of conversations, then their messages; returns the number of messages."""
    for table, names, rows in (
        ("chat_conversation", columns[0], conversations),
        ("chat_message", columns[1], messages),
    ):
        with raw.copy(f"COPY {table} ({', '.join(names)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    return len(messages)


def _insert_sql(table: str, columns: list[str]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['?'] * len(columns))})"


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat(" ")
    return value


def _sqlite_insert(
    raw: Any, conversation_sql: str, conversations: list[Any], message_sql: str, messages: list[Any]
) -> int:
    # Django's SQLite connection is in autocommit mode: one transaction per batch, not per row.
    raw.execute("BEGIN")
    raw.executemany(conversation_sql, conversations)
    raw.executemany(message_sql, messages)
    raw.execute("COMMIT")
    return len(messages)


def _indexes_drop() -> list[str]:
    """Drop the chat tables' secondary indexes (PostgreSQL); return the SQL that builds them again."""
    from django.db import connection

    rebuild = []
    with connection.cursor() as cursor:
        for table in ("chat_conversation", "chat_message"):
            cursor.execute(
                "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.tablename = %s AND NOT EXISTS "
                "(SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname AND c.conrelid = %s::regclass)",
                [table, table],
            )
            for name, definition in cursor.fetchall():
                cursor.execute(f'DROP INDEX "{name}"')
                rebuild.append(definition)
    return rebuild


# --- timing -----------------------------------------------------------------------------------


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def time_queries(user_id: int, runs: int, conversations: int, database: str) -> None:
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    client = Client()
    client.force_login(User.objects.get(pk=user_id))
    url = reverse("chat:conversation-list")
    headers = {"HX-Request": "true", "HX-Target": "conversation-results"}
    print(f"{'query':34} {'text':14} {'found':>6} {'p50 ms':>8} {'p95 ms':>8}", flush=True)
    worst = 0.0
    every: list[float] = []
    for label, text in QUERIES:
        timings = []
        found = 0
        for run in range(runs + 1):
            t0 = time.perf_counter()
            response = client.get(url, {"q": text}, headers=headers)
            elapsed = (time.perf_counter() - t0) * 1000
            assert response.status_code == 200, (text, response.status_code)
            found = response.content.decode().count('class="conversation-row"')
            if run:  # the first run warms the caches
                timings.append(elapsed)
        if text.startswith(RARE[:7]):
            assert found == 1, f"{text!r} found {found} conversations in the user's teams, not 1"
        if text == "xylophonist":
            assert found == 0, found
        p50, p95 = statistics.median(timings), _quantile(timings, 0.95)
        worst = max(worst, p95)
        every += timings
        print(
            f"{label:34} {text:14} {found:>5}{'+' if found == 50 else ' '} {p50:8.1f} {p95:8.1f}", flush=True
        )
    print(
        f"search {database}: worst p95 {worst:.0f} ms, all queries p50 {statistics.median(every):.0f} ms "
        f"over {conversations:,} conversations",
        flush=True,
    )


# --- databases ------------------------------------------------------------------------------


def _pg_admin_url() -> str:
    url = os.environ.get("DATABASE_URL", "") or "postgres://postgres@127.0.0.1:5432/postgres"
    return url.rsplit("/", 1)[0] + "/postgres"


def _pg(admin_url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def _sqlite_unlink(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(path + suffix).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
