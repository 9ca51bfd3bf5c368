"""Transactional tests on PostgreSQL empty the tables with DELETE, not TRUNCATE.

After each transactional test (the browser flows, the live app's), Django flushes the test
database: on PostgreSQL one `TRUNCATE` of every table (75), which makes new files for each table
and index and took ~0.29 s, for tables holding a handful of rows. `DELETE FROM` each table, in
one transaction, takes ~0.01 s. The order does not matter: every foreign key Django makes on
PostgreSQL is checked at commit (DEFERRABLE INITIALLY DEFERRED), when all the tables are empty,
and a test asserts that none is made otherwise. A flush that resets sequences or cascades
(`reset_sequences`, `available_apps`) still truncates.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.core.management.color import Style
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.backends.postgresql.operations import DatabaseOperations

_truncating = DatabaseOperations.sql_flush


def _deleting(
    self: BaseDatabaseOperations,
    style: Style,
    tables: Sequence[str],
    *,
    reset_sequences: bool = False,
    allow_cascade: bool = False,
) -> list[str]:
    if reset_sequences or allow_cascade:
        return _truncating(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
    delete = style.SQL_KEYWORD("DELETE FROM")
    return [f"{delete} {style.SQL_FIELD(self.quote_name(table))};" for table in tables]


def flush_by_delete() -> None:
    """Make PostgreSQL's test flush delete rows instead of truncating tables (this process)."""
    DatabaseOperations.sql_flush = _deleting  # type: ignore[method-assign]  # the suite's own, on purpose
