"""The rollups' statements: the buckets' upsert, the rebuild's INSERT ... SELECT, and its lock.

A table's buckets are one upsert, `INSERT ... VALUES (...), (...) ON CONFLICT (key) DO UPDATE
SET n = n + excluded.n`, the same statement on SQLite and PostgreSQL: concurrent writers of the
same bucket serialize on its row and none of their increments is lost (no read-modify-write in
Python); the upserts of several tables go at once (`rollups_upsert`). The rebuild inserts what
an ORM `SELECT ... GROUP BY` returns, under its `r_<column>` aliases.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Model, QuerySet

from playground.usage.models import UsageRecord
from playground.usage.statements import raw_sql

# One bucket's row: its key (dimensions), what it adds (measures), and its extremes (a value and
# "<" to keep the lower, ">" the higher).
type Extremes = dict[str, tuple[Any, str]]
type BucketRow = tuple[dict[str, Any], dict[str, int], Extremes]

# Rows per statement: far under SQLite's 32,766 parameters for the widest table.
ROWS_PER_STATEMENT = 200


def rollup_upsert(
    model: type[Model],
    dimensions: dict[str, Any],
    measures: dict[str, int],
    *,
    extremes: Extremes | None = None,
) -> None:
    """Add `measures` to the row of `dimensions`; `extremes` columns keep the lower ("<") or higher (">")."""
    rollup_upsert_many(model, [(dimensions, measures, extremes or {})])


def rollup_upsert_many(model: type[Model], rows: list[BucketRow]) -> None:
    """`rollup_upsert` for several buckets of one table at once, in one statement: each row a
    distinct key, all with the same columns. Rows are written in key order, so two writers
    that share buckets lock them in the same order."""
    rollups_upsert([(model, rows)])


def rollups_upsert(tables: Sequence[tuple[type[Model], list[BucketRow]]]) -> None:
    """`rollup_upsert_many` for several tables, in the order given, their statements sent at once
    (`raw_sql.execute_in_order`: a settled group's ten tables in one round trip on PostgreSQL)."""
    db_value = raw_sql.db_values_once()
    raw_sql.execute_in_order(
        [statement for model, rows in tables for statement in _upserts(model, rows, db_value)]
    )


def _upserts(model: type[Model], rows: list[BucketRow], db_value: raw_sql.DbValue) -> list[raw_sql.Statement]:
    """The statements of `rollup_upsert_many`: one per `ROWS_PER_STATEMENT` rows, in key order."""
    if not rows:
        return []
    dimensions, measures, extremes = (tuple(part) for part in rows[0])
    rows = sorted(rows, key=lambda row: tuple(row[0].values()))
    statements: list[raw_sql.Statement] = []
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[start : start + ROWS_PER_STATEMENT]
        params = [
            value
            for keys, adds, kept in chunk
            for value in (
                *(db_value(model, name, keys[name]) for name in dimensions),
                *(adds[name] for name in measures),
                *(db_value(model, name, kept[name][0]) for name in extremes),
            )
        ]
        sql = _upsert_sql(
            model,
            dimensions,
            tuple((name, any(adds[name] for _, adds, _ in chunk)) for name in measures),
            tuple((name, rows[0][2][name][1]) for name in extremes),
            connection.vendor,
            len(chunk),
        )
        statements.append((sql, params))
    return statements


@functools.cache
def _upsert_sql(
    model: type[Model],
    dimensions: tuple[str, ...],
    measures: tuple[tuple[str, bool], ...],
    extremes: tuple[tuple[str, str], ...],
    vendor: str,
    rows: int,
) -> str:
    """The upsert's statement, made once per shape (issue 24: quoting its 40 names each time
    was a fifth of a settlement's time). `measures`: each name and whether any row adds to it."""
    quote, table = raw_sql.quoted, raw_sql.table(model)
    columns = [*dimensions, *(name for name, _ in measures), *(name for name, _ in extremes)]
    sets = [
        f"{quote(name)} = {table}.{quote(name)} + excluded.{quote(name)}"
        for name, nonzero in measures
        if nonzero
    ] + [
        f"{quote(name)} = CASE WHEN excluded.{quote(name)} {keep} {table}.{quote(name)} "
        f"THEN excluded.{quote(name)} ELSE {table}.{quote(name)} END"
        for name, keep in extremes
    ]
    increments = ", ".join(sets)  # never empty: every bucket counts its requests
    # Only quoted identifiers from our own models are formatted in; every value is a parameter.
    column_list = ", ".join(quote(c) for c in columns)
    row = "(" + ", ".join(["%s"] * len(columns)) + ")"
    key = ", ".join(quote(c) for c in dimensions)
    return (
        f"INSERT INTO {table} ({column_list}) VALUES {', '.join([row] * rows)} "  # noqa: S608
        f"ON CONFLICT ({key}) DO UPDATE SET {increments}"
    )


def rollup_insert_select(model: type[Any], select: QuerySet[Any]) -> None:
    """INSERT INTO rollup (columns) SELECT the `r_<column>` aliases of `select`."""
    quote = raw_sql.quoted
    names = [
        name.removeprefix("r_") for name in (*select.query.values_select, *select.query.annotation_select)
    ]
    names = list(dict.fromkeys(names))
    sql, params = select.query.sql_with_params()
    columns = ", ".join(quote(name) for name in names)
    aliases = ", ".join(quote(f"r_{name}") for name in names)
    table = raw_sql.table(model)
    with connection.cursor() as cursor:
        insert = f"INSERT INTO {table} ({columns}) SELECT {aliases} FROM ({sql}) AS rollup_source"  # noqa: S608
        cursor.execute(insert, params)


def records_lock_against_writes() -> None:
    """On PostgreSQL, lock the records table against writes until the transaction ends (SHARE
    mode: reads go on), so a record written during a rebuild is neither missed nor counted twice.
    SQLite has one writer anyway."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {raw_sql.table(UsageRecord)} IN SHARE MODE")
