"""The rollups' statements: one bucket's upsert, the rebuild's INSERT ... SELECT, and its lock.

Each bucket is one upsert, `INSERT ... ON CONFLICT (key) DO UPDATE SET n = n + excluded.n`,
the same statement on SQLite and PostgreSQL: concurrent writers of the same bucket serialize on
its row and none of their increments is lost (no read-modify-write in Python). The rebuild
inserts what an ORM `SELECT ... GROUP BY` returns, under its `r_<column>` aliases.
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import connection
from django.db.models import Model, QuerySet

from playground.usage.models import UsageRecord
from playground.usage.statements import raw_sql


def rollup_upsert(
    model: type[Model],
    dimensions: dict[str, Any],
    measures: dict[str, int],
    *,
    extremes: dict[str, tuple[Any, str]] | None = None,
) -> None:
    """Add `measures` to the row of `dimensions`; `extremes` columns keep the lower ("<") or higher (">")."""
    extremes = extremes or {}
    params = (
        [raw_sql.db_value(model, name, value) for name, value in dimensions.items()]
        + list(measures.values())
        + [raw_sql.db_value(model, name, value) for name, (value, _) in extremes.items()]
    )
    sql = _upsert_sql(
        model,
        tuple(dimensions),
        tuple((name, bool(value)) for name, value in measures.items()),
        tuple((name, keep) for name, (_, keep) in extremes.items()),
        connection.vendor,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


@functools.cache
def _upsert_sql(
    model: type[Model],
    dimensions: tuple[str, ...],
    measures: tuple[tuple[str, bool], ...],
    extremes: tuple[tuple[str, str], ...],
    vendor: str,
) -> str:
    """The upsert's statement, made once per shape (issue 24: quoting its 40 names each time
    was a fifth of a settlement's time). `measures`: each name and whether its value is not 0."""
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
    increments = ", ".join(sets)
    # Only quoted identifiers from our own models are formatted in; every value is a parameter.
    column_list = ", ".join(quote(c) for c in columns)
    placeholders = ", ".join(["%s"] * len(columns))
    key = ", ".join(quote(c) for c in dimensions)
    return f"INSERT INTO {table} ({column_list}) VALUES ({placeholders}) ON CONFLICT ({key}) DO UPDATE SET {increments}"  # noqa: S608, E501


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
