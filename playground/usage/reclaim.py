"""Gone means gone from the files too (issue 37): after erasure or retention has deleted rows or
blanked their text, the database's freed space is reclaimed so the values are not left behind.

On SQLite every connection runs with `secure_delete` on (the `init_command` in
`playground.settings`), so a deleted or overwritten value is zeroed in the page that held it;
but in WAL mode that zeroed page is only a new frame of the `-wal` file, the main file keeps
the old page, and old frames keep old versions until a checkpoint. `reclaim_freed_space` runs
`PRAGMA wal_checkpoint(TRUNCATE)`: every frame is copied into the main file and the log is cut
to nothing. On PostgreSQL it runs `VACUUM` on the tables the run touched (and their TOAST
tables), which removes the dead row versions so their space is reused; PostgreSQL does not zero
that space, so see docs/guide/data-governance.md for what remains until it is reused.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import connection, transaction
from django.db.models import Model

logger = logging.getLogger(__name__)


def reclaim_freed_space(tables: Iterable[type[Model]]) -> None:
    """Reclaim the space freed by a deletion in `tables` (their models), now or, when called
    inside a transaction, once it commits (neither a checkpoint nor `VACUUM` can see or run
    inside one). A failure is logged, never raised: the deletion itself has already committed."""
    models = list(tables)
    if connection.in_atomic_block:
        transaction.on_commit(lambda: _reclaim(models), robust=True)
    else:
        _reclaim(models)


def _reclaim(models: list[type[Model]]) -> None:
    try:
        if connection.vendor == "sqlite":
            _sqlite_checkpoint()
        elif connection.vendor == "postgresql":
            _postgresql_vacuum(models)
    except Exception:
        logger.exception("reclaiming freed space failed; the next run tries again")


def _sqlite_checkpoint() -> None:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA secure_delete")
        (secure,) = cursor.fetchone()
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        busy, _frames, _copied = cursor.fetchone()
    if not secure:
        # A connection opened without the settings' init_command (a DATABASE_URL of sqlite://).
        logger.warning("SQLite runs without secure_delete: deleted values may stay in freed pages")
    if busy:
        # A reader held an old snapshot past the busy timeout: the frames after it stay in the
        # log until the next checkpoint (SQLite's own, or the next run's).
        logger.warning("the write-ahead log could not be emptied: a reader held it; the next run tries again")


def _postgresql_vacuum(models: list[type[Model]]) -> None:
    tables = sorted({model._meta.db_table for model in models})
    with connection.cursor() as cursor:
        for name in tables:
            cursor.execute(f"VACUUM {connection.ops.quote_name(name)}")
