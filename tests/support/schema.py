"""One migrated schema per test run, copied into each parallel worker's test database.

Migrating an empty database (every app's migrations, 110 of them) costs ~22 s of CPU, nearly all
of it Django rendering the models' intermediate states, not SQL; each pytest-xdist worker of
`make test` and `make test-services` did it for its own database. Now the first worker to get
here migrates its database exactly as before and keeps a copy of it (a SQLite file, or a
PostgreSQL database made from it as a TEMPLATE); the others wait for that, copy it, and find
nothing left to migrate (a no-op `migrate`, ~0.6 s). The migrations still run in full on an empty
database once per run and profile, with their data migrations and SQL; the copies are
byte-for-byte what they made.

The copy lives as long as the run: it is named after the xdist controller's process (the
workers' parent), which removes it when the run ends (`schema_copies_remove`). Without workers,
or with --reuse-db / --create-db / --no-migrations, the database is set up as pytest-django does.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test.utils import setup_databases

PREFIX = "playground-test-schema"
# The run's copy this worker's database came from or was copied to, by vendor.
_made: dict[str, str] = {}


def _paths(run: int) -> tuple[Path, Path]:
    """The lock every worker of run `run` (the controller's pid) takes, and the SQLite copy."""
    folder = Path(tempfile.gettempdir())
    return folder / f"{PREFIX}-{run}.lock", folder / f"{PREFIX}-{run}.sqlite3"


def _test_name(connection: BaseDatabaseWrapper) -> str:
    """The test database's name (Django's private helper, which django-stubs leaves out)."""
    return str(getattr(connection.creation, "_get_test_db_name")())  # noqa: B009


def _template_name(connection: BaseDatabaseWrapper, run: int, worker: str) -> str:
    """The PostgreSQL copy's name: the test database's without the worker's suffix, and the run."""
    return f"{_test_name(connection).removesuffix(f'_{worker}')}_schema_{run}"


def _setup(aliases: set[str], serialized_aliases: set[str], verbosity: int, *, keepdb: bool) -> list[Any]:
    # django-stubs types `aliases` as a mapping; Django only iterates it and asks `in`.
    return setup_databases(
        verbosity=verbosity,
        interactive=False,
        aliases=dict.fromkeys(aliases),
        serialized_aliases=serialized_aliases,
        keepdb=keepdb,
    )


@contextlib.contextmanager
def _run_lock(run: int) -> Iterator[None]:
    lock_path, _ = _paths(run)
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _sqlite_copy(source: str, target: str) -> None:
    """A consistent copy with SQLite's backup API (it reads through the source's WAL)."""
    with (
        contextlib.closing(sqlite3.connect(source)) as src,
        contextlib.closing(sqlite3.connect(target)) as dst,
    ):
        src.backup(dst)


def _postgres_copy(connection: BaseDatabaseWrapper, source: str, target: str) -> None:
    """`target` made anew from `source` (which nobody may be connected to meanwhile)."""
    quote = connection.ops.quote_name
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {quote(target)}")
        cursor.execute(f"CREATE DATABASE {quote(target)} TEMPLATE {quote(source)}")


def databases_set_up(
    *, worker: str | None, aliases: set[str], serialized_aliases: set[str], verbosity: int, keepdb: bool
) -> list[Any]:
    """`setup_databases`; for a parallel worker (`worker`, its xdist id, when the database is
    migrated anew) from the run's migrated copy once one exists. Returns the `old_config` that
    `teardown_databases` takes."""
    connection = connections[DEFAULT_DB_ALIAS]
    vendor = connection.vendor
    if worker is None or keepdb or aliases != {DEFAULT_DB_ALIAS} or vendor not in ("sqlite", "postgresql"):
        return _setup(aliases, serialized_aliases, verbosity, keepdb=keepdb)
    run = os.getppid()
    _, sqlite_template = _paths(run)
    template = str(sqlite_template) if vendor == "sqlite" else _template_name(connection, run, worker)
    test_name = _test_name(connection)
    with _run_lock(run):
        if vendor == "sqlite":
            made = sqlite_template.exists()
        else:
            with connection._nodb_cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [template])
                made = cursor.fetchone() is not None
        if made:
            if vendor == "sqlite":
                _sqlite_copy(template, test_name)
            else:
                _postgres_copy(connection, template, test_name)
        old_config = _setup(aliases, serialized_aliases, verbosity, keepdb=made)  # a copy: all applied
        if not made:
            connection.close()
            if vendor == "sqlite":
                _sqlite_copy(connection.settings_dict["NAME"], template)
            else:
                _postgres_copy(connection, connection.settings_dict["NAME"], template)
    _made[vendor] = template
    return old_config


def sqlite_schema_copy() -> Path | None:
    """This run's migrated SQLite copy, once this worker's database was set up from it (None
    without workers or on PostgreSQL): the benchmarks' smoke runs start their databases from it."""
    _, sqlite_template = _paths(os.getppid())
    return sqlite_template if _made.get("sqlite") == str(sqlite_template) else None


def postgres_database_from_schema_copy(connection: BaseDatabaseWrapper, name: str) -> bool:
    """Make PostgreSQL database `name` from this run's migrated copy, as a worker's own database
    is made (no migration to run in it); False if this worker's database came from no copy."""
    template = _made.get("postgresql")
    if template is None:
        return False
    with _run_lock(os.getppid()):  # nobody may be connected to a TEMPLATE while it is copied
        _postgres_copy(connection, template, name)
    return True


def schema_copies_remove() -> None:
    """Remove this run's copy (in the xdist controller, after its workers ended)."""
    lock_path, sqlite_template = _paths(os.getpid())
    if not lock_path.exists():
        return  # no worker set up a database
    sqlite_template.unlink(missing_ok=True)
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor == "postgresql":
        name = _template_name(connection, os.getpid(), worker="")
        with connection._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(name)}")
    lock_path.unlink(missing_ok=True)
