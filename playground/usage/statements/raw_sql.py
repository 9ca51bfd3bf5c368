"""The one helper set of the hand-written statements: the models' names and the ORM's values.

The statements stay portable (names quoted by the connection, `%s` parameters) and see the
same values the ORM would: parameters go through each field's `get_db_prep_save`, and rows
come back through the same converters the ORM's compiler applies, into `Model.from_db`
instances. `insert_many` is the records' group INSERT (`bulk_create` without its query
building). Why hand-written at all: `playground.usage.statements`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django.db.models.expressions import DatabaseDefault

Converter = Callable[[Any, Any, Any], Any]


def table(model: type[Model]) -> str:
    """The model's table, quoted for the connection."""
    return connection.ops.quote_name(model._meta.db_table)


def quoted(name: str) -> str:
    """A column name, quoted for the connection (`column` when the model is at hand)."""
    return connection.ops.quote_name(name)


def column(model: type[Model], name: str, *, alias: str = "") -> str:
    """A field's column, quoted, qualified by `alias` when given."""
    field: Field[Any, Any] = model._meta.get_field(name)  # type: ignore[assignment]
    quoted = connection.ops.quote_name(str(field.column))
    return f"{connection.ops.quote_name(alias)}.{quoted}" if alias else quoted


def columns(model: type[Model], *names: str, alias: str = "") -> str:
    """Several of `model`'s columns, comma-separated (see `column`)."""
    return ", ".join(column(model, name, alias=alias) for name in names)


def decimal_parameter(vendor: str) -> str:
    """A decimal parameter inside arithmetic, cast as the ORM casts it: SQLite computes its
    NUMERIC columns as REAL."""
    return "CAST(%s AS REAL)" if vendor == "sqlite" else "%s"


def db_value(model: type[Model], name: str, value: Any) -> Any:
    """`value` as the ORM would send it for the field `name` (or its attname) of `model`."""
    field: Field[Any, Any] = model._meta.get_field(name)  # type: ignore[assignment]
    return field.get_db_prep_save(value, connection)


type DbValue = Callable[[type[Model], str, Any], Any]


def db_values_once() -> DbValue:
    """`db_value`, converting each value of a kind of field once: for the statements of a settled
    group's rollups, which send the same team, model, user, hour and day to ten tables (their
    conversions were two fifths of the rollups' time). Values must be hashable."""
    database = connections[DEFAULT_DB_ALIAS]
    converted: dict[tuple[type[Field[Any, Any]], str, Any], Any] = {}

    def convert(model: type[Model], name: str, value: Any) -> Any:
        field = _field(model, name)
        key = (type(field), name, value)
        if key not in converted:
            converted[key] = field.get_db_prep_save(value, database)
        return converted[key]

    return convert


@cache
def _field(model: type[Model], name: str) -> Field[Any, Any]:
    return model._meta.get_field(name)  # type: ignore[return-value]


type Statement = tuple[str, Sequence[Any]]  # its SQL, with `%s` parameters, and their values


def execute_in_order(statements: Sequence[Statement]) -> None:
    """Run `statements` one after the other, in the order given. On PostgreSQL they go as one
    query string, one round trip and one call into the driver: its cursor binds the parameters
    on the client (psycopg's `ClientCursor`, Django's default), which sends several statements
    at once and runs them in order. Elsewhere, and with server-side binding, one at a time."""
    if not statements:
        return
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql" and not connection.settings_dict["OPTIONS"].get(
            "server_side_binding"
        ):
            cursor.execute(
                "; ".join(sql for sql, _ in statements), [v for _, values in statements for v in values]
            )
            return
        for sql, values in statements:
            cursor.execute(sql, values)


def select_list(model: type[Model], alias: str) -> str:
    """Every concrete column of `model` under `alias`, in `from_row`'s order."""
    return ", ".join(column(model, field.name, alias=alias) for field in model._meta.concrete_fields)


def column_count(model: type[Model]) -> int:
    return len(model._meta.concrete_fields)


def field_value(model: type[Model], name: str, value: Any) -> Any:
    """A value read from the field `name`'s column, converted as the ORM converts it."""
    field: Field[Any, Any] = model._meta.get_field(name)  # type: ignore[assignment]
    database = connections[DEFAULT_DB_ALIAS]
    return _converted(_converters(field, database.vendor), value, database)


def from_row[M: Model](model: type[M], values: Sequence[Any]) -> M:
    """An instance of `model` from its `select_list` columns, as a queryset would load it."""
    database = connections[DEFAULT_DB_ALIAS]
    attnames, converters = _model_converters(model, database.vendor)
    converted = [_converted(field, value, database) for field, value in zip(converters, values, strict=True)]
    return model.from_db(database.alias, attnames, converted)


type FieldConverters = tuple[Any, list[Converter]]  # a field's column, and its converters in order


def _converted(converters: FieldConverters, value: Any, database: BaseDatabaseWrapper) -> Any:
    if value is None:  # every converter leaves a NULL as None
        return None
    expression, functions = converters
    for function in functions:
        value = function(value, expression, database)
    return value


@cache
def _model_converters(model: type[Model], vendor: str) -> tuple[list[str], list[FieldConverters]]:
    fields = model._meta.concrete_fields
    return [field.attname for field in fields], [_converters(field, vendor) for field in fields]


@cache
def _converters(field: Field[Any, Any], vendor: str) -> FieldConverters:
    """The backend's converters for the field's column, then the field's own (the compiler's
    order). Per vendor: a test run may switch databases, a process keeps one."""
    database = connections[DEFAULT_DB_ALIAS]
    expression = field.get_col(field.model._meta.db_table)
    return expression, [*database.ops.get_db_converters(expression), *field.get_db_converters(database)]


def insert_many[M: Model](objs: Sequence[M]) -> list[M]:
    """New instances of one model inserted as `bulk_create` inserts them (each field's
    `pre_save` and `get_db_prep_save`, multi-row INSERTs sized by the backend, primary keys
    read back with RETURNING), without building a query per call. A model with a field that
    needs its own placeholder (`get_placeholder_sql`, e.g. binary) goes through `bulk_create`."""
    if not objs:
        return list(objs)
    model = type(objs[0])
    database = connections[DEFAULT_DB_ALIAS]
    fields = _inserted_fields(model)
    if fields is None:
        return model._default_manager.bulk_create(objs)
    pk = model._meta.pk
    assert pk is not None
    size = max(1, database.ops.bulk_batch_size(fields, objs))
    for start in range(0, len(objs), size):
        chunk = objs[start : start + size]
        params = [
            field.get_db_prep_save(_value_to_insert(field, obj), database)
            for obj in chunk
            for field in fields
        ]
        with database.cursor() as cursor:
            cursor.execute(_insert_sql(model, len(chunk), database.vendor), params)
            ids = cursor.fetchall()
        for obj, (value,) in zip(chunk, ids, strict=True):
            setattr(obj, pk.attname, _converted(_converters(pk, database.vendor), value, database))
            obj._state.adding = False
            obj._state.db = database.alias
    return list(objs)


def _value_to_insert(field: Field[Any, Any], obj: Model) -> Any:
    value = field.pre_save(obj, True)
    # A field left to its `db_default` (a constant: `_inserted_fields`) gets that constant.
    return field.db_default if isinstance(value, DatabaseDefault) else value


@cache
def _inserted_fields(model: type[Model]) -> list[Field[Any, Any]] | None:
    """Every concrete field but an auto primary key; None when one needs its own placeholder or
    has a database default that is an expression rather than a constant."""
    fields = [field for field in model._meta.concrete_fields if field is not model._meta.auto_field]
    if any(
        hasattr(field, "get_placeholder_sql") or hasattr(field.db_default, "resolve_expression")
        for field in fields
    ):
        return None
    return fields


@cache
def _insert_sql(model: type[Model], rows: int, vendor: str) -> str:
    fields = _inserted_fields(model)
    assert fields is not None and model._meta.pk is not None
    row = f"({', '.join(['%s'] * len(fields))})"
    return (
        f"INSERT INTO {table(model)} ({columns(model, *(field.name for field in fields))}) "  # noqa: S608
        f"VALUES {', '.join([row] * rows)} RETURNING {column(model, model._meta.pk.name)}"
    )
