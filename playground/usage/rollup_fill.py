"""Fill a new summed rollup table from an existing one, for migrations (historical models).

A migration that adds a coarser table calls this so databases that already hold records
get it filled at once, without `rebuild_usage_rollups`.
"""

from __future__ import annotations

from typing import Any


def insert_summed(
    apps: Any,
    schema_editor: Any,
    *,
    target: str,
    source: str,
    dimensions: list[str],
    extremes: dict[str, str] | None = None,
) -> None:
    """INSERT INTO target SELECT dimensions, SUM(every other column) FROM source GROUP BY dimensions.

    `extremes`: target column -> "MIN(bucket)" style aggregate for columns that are not sums.
    """
    quote = schema_editor.quote_name
    extremes = extremes or {}
    model = apps.get_model("usage", target)
    measures = [
        field.column
        for field in model._meta.concrete_fields
        if field.column not in dimensions and field.column != "id" and field.column not in extremes
    ]
    columns = ", ".join(quote(c) for c in [*dimensions, *measures, *extremes])
    selected = ", ".join(
        [quote(c) for c in dimensions] + [f"SUM({quote(c)})" for c in measures] + list(extremes.values())
    )
    keys = ", ".join(quote(c) for c in dimensions)
    table = quote(apps.get_model("usage", source)._meta.db_table)
    # Only quoted names of our own models and fixed aggregates are formatted in.
    sql = f"INSERT INTO {quote(model._meta.db_table)} ({columns}) SELECT {selected} FROM {table} GROUP BY {keys}"  # noqa: S608, E501
    schema_editor.execute(sql)
