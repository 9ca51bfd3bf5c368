"""Streamed exports of the filtered request log: CSV (two flavours), JSONL and XLSX.

The CSV comes in two flavours (`CSV_FLAVOURS`). "For spreadsheets" starts with a UTF-8 BOM
(Excel then reads it as UTF-8) and guards text a spreadsheet would run as a formula
(`formula_safe`), quoting cells only where needed, lines ending in "\n". "For data tools" is
RFC 4180 with every value exactly as in the JSONL: no BOM, no guard, CRLF line ends, every
value quoted and NULL alone left an unquoted empty field, so a reader that tells them apart
(PostgreSQL's COPY FROM, Python's csv with QUOTE_NOTNULL) gets "" and null back as the JSONL
has them.

Memory stays flat whatever the row count. On PostgreSQL the CSV is written by the server:
`COPY (SELECT ...) TO STDOUT WITH (FORMAT csv, HEADER)` over the same filtered query as the
log (`request_log.log_records`), with the joins, the formula escaping and the value formats in
SQL (`copy_sql`), and its blocks are passed through in pieces of about `COPY_PIECE` bytes.
Elsewhere (SQLite, the embedded default) and for JSONL and XLSX, rows are read in keyset
chunks (`request_log.export_chunks`) and each chunk is encoded and sent before the next is read.
Both CSV paths give the same bytes in each flavour (for data tools the CRLF replaces the "\n"
that ends each row COPY hands over: it hands over one row at a time). The streams are async
generators that do their database work in Django's thread for the connection
(`sync_to_async(thread_sensitive=True)`), because Django's ASGI handler buffers a synchronous
iterator whole before sending it.

XLSX cannot be written as a byte stream (it is a zip with a directory at the end), so it is
written with XlsxWriter's `constant_memory` mode (one row in memory at a time) into a
temporary file, which is then streamed and deleted.

Columns are documented in docs/usage-analytics.md; `COLUMNS` here is their single source.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import tempfile
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import aclosing
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections, models, transaction
from django.db.models import F

from playground.analytics.filters import Filters
from playground.analytics.selectors.request_log import EXPORT_COMPUTED, export_chunks, log_records
from playground.lib.asyncutil import finish_even_if_cancelled

# (header, field of records.EXPORT_FIELDS)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("request_id", "request_id"),
    ("created_at", "created_at"),
    ("team", "team__slug"),
    ("user", "user__username"),
    ("connection", "connection__name"),
    ("model_id", "model_id"),
    ("path", "path"),
    ("status", "status"),
    ("streamed", "streamed"),
    ("affinity_key", "affinity_key"),
    ("conversation_id", "conversation_id"),
    ("preset_version_id", "preset_version_id"),
    ("source", "source"),
    ("api_key_name", "api_key__name"),
    ("api_key_prefix", "api_key__prefix"),
    ("end_user", "end_user"),
    ("session", "session"),
    ("tags", "tag_list"),
    ("metadata", "metadata_json"),
    ("trace_id", "trace_id"),
    ("prompt_tokens", "prompt_tokens"),
    ("cached_tokens", "cached_tokens"),
    ("cache_write_tokens", "cache_write_tokens"),
    ("completion_tokens", "completion_tokens"),
    ("reasoning_tokens", "reasoning_tokens"),
    ("usage_source", "usage_source"),
    ("usage_implausible", "usage_implausible"),
    ("price_card_id", "price_card_id"),
    ("price_card_label", "price_card__label"),
    ("price_card_effective_from", "price_card__effective_from"),
    ("input_per_m_usd", "price_card__input_per_m"),
    ("cached_input_per_m_usd", "price_card__cached_input_per_m"),
    ("cache_write_input_per_m_usd", "price_card__cache_write_input_per_m"),
    ("output_per_m_usd", "price_card__output_per_m"),
    ("input_cost_usd", "input_cost"),
    ("cached_input_cost_usd", "cached_input_cost"),
    ("cache_write_cost_usd", "cache_write_cost"),
    ("output_cost_usd", "output_cost"),
    ("total_cost_usd", "total_cost"),
    ("ttft_ms", "ttft_ms"),
    ("latency_ms", "latency_ms"),
    ("upstream_request_id", "upstream_request_id"),
    ("http_status", "http_status"),
    ("error_code", "error_code"),
    ("error_text", "error_text"),
)
HEADERS = [header for header, _ in COLUMNS]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
BOM = "\ufeff"
SPREADSHEET = "spreadsheet"
DATA = "data"
CSV_FLAVOURS = (SPREADSHEET, DATA)
FILE_CHUNK = 64 * 1024


def formula_safe(value: str) -> str:
    """A text cell that a spreadsheet will not run: a leading = + - @ tab or CR gets a quote.

    OWASP's advice for CSV injection: the apostrophe makes Excel, LibreOffice and Google
    Sheets show the text as typed instead of evaluating it.
    """
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def _text(value: Any) -> Any:
    return "" if value is None else formula_safe(str(value))


def _number(value: Any) -> Any:
    return "" if value is None else value


def _decimal(value: Any) -> Any:
    return "" if value is None else format(value, "f")  # exact, never "1E-10"


def _isoformat(value: dt.date) -> str:
    # A timestamp always carries its microseconds (as COPY's to_char writes them), so every
    # row of a column has one shape; datetime.isoformat() alone drops them when they are 0.
    if isinstance(value, dt.datetime):
        return value.isoformat(timespec="microseconds")
    return value.isoformat()


def _iso(value: Any) -> Any:
    return "" if value is None else _isoformat(value)


def _boolean(value: Any) -> Any:
    return "" if value is None else ("true" if value else "false")


# The data flavour's cells: None stays None (an unquoted empty field), the rest as in the JSONL.
def _as_is(value: Any) -> Any:
    return value


def _data_text(value: Any) -> Any:
    return None if value is None else str(value)


def _data_decimal(value: Any) -> Any:
    return None if value is None else format(value, "f")


def _data_iso(value: Any) -> Any:
    return None if value is None else _isoformat(value)


def _data_boolean(value: Any) -> Any:
    return None if value is None else ("true" if value else "false")


# One kind per column, chosen once (a type test per cell would halve the export's speed). A
# kind is written by its Python converter (CSV_CONVERTERS) or, on PostgreSQL, by its SQL
# expression (_SQL_CELLS); the two must give the same text, and the tests hold them to it.
_DECIMALS = {"input_cost", "cached_input_cost", "cache_write_cost", "output_cost", "total_cost"}
_NUMBERS = {
    "conversation_id", "preset_version_id", "prompt_tokens", "cached_tokens", "cache_write_tokens",
    "completion_tokens", "reasoning_tokens", "price_card_id", "ttft_ms", "latency_ms", "http_status",
}  # fmt: skip
_UUIDS = {"request_id"}
_TIMESTAMPS = {"created_at"}
_DATES = {"price_card__effective_from"}
_BOOLEANS = {"streamed", "usage_implausible"}


def _kind(field: str) -> str:
    if field in _DECIMALS or field.endswith("_per_m"):
        return "decimal"
    if field in _NUMBERS:
        return "number"
    if field in _UUIDS:
        return "uuid"
    if field in _TIMESTAMPS:
        return "timestamp"
    if field in _DATES:
        return "date"
    if field in _BOOLEANS:
        return "boolean"
    return "text"


FIELDS = [field for _, field in COLUMNS]
KINDS = [_kind(field) for field in FIELDS]
_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "text": _text,
    "uuid": _text,
    "number": _number,
    "decimal": _decimal,
    "timestamp": _iso,
    "date": _iso,
    "boolean": _boolean,
}
_DATA_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "text": _as_is,
    "uuid": _data_text,
    "number": _as_is,
    "decimal": _data_decimal,
    "timestamp": _data_iso,
    "date": _data_iso,
    "boolean": _data_boolean,
}
CSV_CONVERTERS = {
    SPREADSHEET: [_CONVERTERS[kind] for kind in KINDS],
    DATA: [_DATA_CONVERTERS[kind] for kind in KINDS],
}
# The same cells in SQL, `{c}` standing for the column. For spreadsheets NULL and "" both come
# out as NULL, which COPY writes as an empty unquoted field, as Python's csv writes "" (COPY
# would quote a non-NULL ""); for data tools text stays as it is and FORCE_QUOTE * quotes every
# value but NULL, as QUOTE_NOTNULL does. Integers need nothing; numeric's text keeps the
# column's scale and never has an exponent, like format(Decimal, "f") (cast here so a joined
# card's is formatted once). Dates and times go through to_char so the server's DateStyle and
# TimeZone cannot change them.
_FORMULA_CODES = ", ".join(str(ord(start)) for start in FORMULA_STARTS)
_SPREADSHEET_SQL_CELLS = {
    "text": f"CASE WHEN ascii({{c}}) IN ({_FORMULA_CODES}) THEN '''' || {{c}} ELSE NULLIF({{c}}, '') END",
    "uuid": "{c}",  # hex digits and hyphens: never a formula, never empty
    "number": "{c}",
    "decimal": "{c}::text",
    "timestamp": """to_char({c} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')""",
    "date": "to_char({c}, 'YYYY-MM-DD')",
    "boolean": "CASE WHEN {c} THEN 'true' WHEN NOT {c} THEN 'false' END",
}
_SQL_CELLS = {SPREADSHEET: _SPREADSHEET_SQL_CELLS, DATA: {**_SPREADSHEET_SQL_CELLS, "text": "{c}"}}
_COPY_OPTIONS = {SPREADSHEET: "FORMAT csv, HEADER", DATA: "FORMAT csv, HEADER, FORCE_QUOTE *"}
COPY_PIECE = 128 * 1024  # bytes per hop out of the database thread: ~400 rows


def csv_row(row: dict[str, Any], *, flavour: str = SPREADSHEET) -> list[Any]:
    converters = CSV_CONVERTERS[flavour]
    return [convert(row[field]) for convert, field in zip(converters, FIELDS, strict=True)]


def json_row(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for header, field in COLUMNS:
        value = row[field]
        if isinstance(value, Decimal):
            value = format(value, "f")  # exact: a float would round costs
        elif isinstance(value, dt.date):
            value = _isoformat(value)
        elif field == "request_id":
            value = str(value)
        elif field == "metadata_json" and value is not None:
            value = json.loads(value)  # an object here, its JSON text in the CSV and XLSX
        out[header] = value
    return out


async def _hops[T](items: Iterator[T]) -> AsyncGenerator[T]:
    """A generator that uses the database, driven one item per hop in Django's thread for the
    connection, and closed there whatever ends the stream (a client that goes away included)."""
    step: Callable[[], T | None] = lambda: next(items, None)  # noqa: E731
    try:
        while (item := await sync_to_async(step, thread_sensitive=True)()) is not None:
            yield item
    finally:
        close = getattr(items, "close", None)  # a generator's: it leaves its `with` blocks
        if close is not None:
            await finish_even_if_cancelled(sync_to_async(close, thread_sensitive=True)())


def copies_csv(filters: Filters) -> bool:
    """Whether the CSV of these filters is written by the database (PostgreSQL's COPY)."""
    return connections[log_records(filters).db].vendor == "postgresql"


def _related(model: type[models.Model], relation: str) -> tuple[str, Any]:
    """The foreign key's column attribute (`user_id`) and the related model's options."""
    key = model._meta.get_field(relation)
    assert isinstance(key, models.ForeignKey)
    return key.attname, key.related_model._meta


def copy_sql(filters: Filters, *, flavour: str = SPREADSHEET) -> tuple[str, tuple[Any, ...]]:
    """PostgreSQL's COPY of the filtered log as CSV of the flavour, newest first, and its parameters.

    The rows are `request_log.log_records` (the log's one definition of the filters), compiled by
    Django; the cells are formatted around it by `_SQL_CELLS`. A joined column (`user__username`)
    comes from a LEFT JOIN LATERAL on its relation that formats it there: `OFFSET 0` keeps that
    subquery whole, so PostgreSQL memoizes it per key and formats a team's few users,
    connections and price cards once each, not once per row (a third of the COPY's time).
    """
    records = log_records(filters).order_by("-created_at", "-id")
    quote = connections[records.db].ops.quote_name
    own: dict[str, Any] = {"row_id": F("id")}
    joined: dict[str, list[str]] = {}  # relation -> its formatted cells
    cells = []
    sql_cells = _SQL_CELLS[flavour]
    for i, (field, kind, header) in enumerate(zip(FIELDS, KINDS, HEADERS, strict=True)):
        relation, _, name = field.rpartition("__")
        if relation:
            column = _related(records.model, relation)[1].get_field(name).column
            cell = sql_cells[kind].format(c=f"r.{quote(column)}")
            joined.setdefault(relation, []).append(f"{cell} AS c{i}")
            cells.append(f"j_{relation}.c{i} AS {quote(header)}")
        else:
            own[f"c{i}"] = EXPORT_COMPUTED.get(field, F(field))
            cells.append(f"{sql_cells[kind].format(c=f'e.c{i}')} AS {quote(header)}")
    joins = []
    for relation, selected in joined.items():
        key, target = _related(records.model, relation)
        own[f"{relation}_key"] = F(key)
        joins.append(
            f"LEFT JOIN LATERAL (SELECT {', '.join(selected)} FROM {quote(target.db_table)} AS r"  # noqa: S608
            f" WHERE r.{quote(target.pk.column)} = e.{relation}_key OFFSET 0) AS j_{relation} ON true"
        )
    inner = records.values(**own)
    sql, params = inner.query.get_compiler(using=inner.db).as_sql()
    # The outer ORDER BY repeats the inner one, which the planner sees as already met (the
    # lateral joins are nested loops, which keep the order). Only constants and Django's
    # compiled SQL are spliced in; every value stays a parameter.
    at = f"e.c{FIELDS.index('created_at')}"
    select = (
        f"SELECT {', '.join(cells)} FROM ({sql}) AS e {' '.join(joins)}"  # noqa: S608
        f" ORDER BY {at} DESC, e.row_id DESC"
    )
    statement = f"COPY ({select}) TO STDOUT WITH ({_COPY_OPTIONS[flavour]})"
    return statement, tuple(params)


def csv_copy_pieces(
    filters: Filters, *, flavour: str = SPREADSHEET, piece: int = COPY_PIECE
) -> Iterator[bytes]:
    """The CSV as PostgreSQL's COPY writes it, in pieces of about `piece` bytes.

    COPY hands over one row per block (libpq's PQgetCopyData returns whole rows, one at a
    time), so blocks are joined into pieces: one hop out of the database thread per piece, not
    per row; for data tools each row's closing "\n" becomes "\r\n", leaving line breaks inside
    quoted values as they are. Closing the generator before the end (the client
    went away) leaves the `with` blocks: psycopg cancels the COPY and drains what was in
    flight, and the savepoint of `atomic` leaves an enclosing transaction usable after the
    cancel. The generator must run and be closed in one thread (see `_hops`), and nothing else
    may use that connection until it ends (COPY holds it: one request, one thread).
    """
    statement, params = copy_sql(filters, flavour=flavour)
    alias = log_records(filters).db
    crlf = flavour == DATA
    with (
        transaction.atomic(using=alias),
        connections[alias].cursor() as cursor,
        cursor.cursor.copy(statement, params) as copy,
    ):
        blocks: list[Any] = []
        size = 0
        for block in copy:
            if crlf:
                blocks += (memoryview(block)[:-1], b"\r\n")
            else:
                blocks.append(block)
            size += len(block)
            if size >= piece:
                yield b"".join(blocks)
                blocks.clear()
                size = 0
        if blocks:
            yield b"".join(blocks)


def csv_python_pieces(filters: Filters, *, flavour: str = SPREADSHEET) -> Iterator[bytes]:
    """The CSV formatted here from keyset chunks (SQLite), one piece per chunk."""
    buffer = io.StringIO()
    if flavour == DATA:
        buffer.write(",".join(HEADERS) + "\r\n")  # as COPY writes its header: names need no quotes
        writer = csv.writer(buffer, lineterminator="\r\n", quoting=csv.QUOTE_NOTNULL)
    else:
        writer = csv.writer(buffer, lineterminator="\n")  # COPY's line end, so both give the same bytes
        writer.writerow(HEADERS)
    for rows in export_chunks(filters):
        writer.writerows(csv_row(row, flavour=flavour) for row in rows)
        yield buffer.getvalue().encode()
        buffer.seek(0)
        buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue().encode()


async def csv_stream(filters: Filters, *, flavour: str = SPREADSHEET) -> AsyncGenerator[bytes]:
    if flavour == SPREADSHEET:
        yield BOM.encode()
    copied = copies_csv(filters)
    pieces = (csv_copy_pieces if copied else csv_python_pieces)(filters, flavour=flavour)
    async with aclosing(_hops(pieces)) as stream:
        async for piece in stream:
            yield piece


async def jsonl_stream(filters: Filters) -> AsyncGenerator[bytes]:
    async with aclosing(_hops(export_chunks(filters))) as chunks:
        async for rows in chunks:
            yield "".join(json.dumps(json_row(row), ensure_ascii=False) + "\n" for row in rows).encode()


def xlsx_write(filters: Filters) -> str:
    """Write the filtered log to a temporary .xlsx (constant memory); the caller deletes it."""
    import xlsxwriter  # only exports need it

    handle, path = tempfile.mkstemp(suffix=".xlsx", prefix="usage-export-")
    os.close(handle)
    workbook = xlsxwriter.Workbook(path, {"constant_memory": True, "strings_to_formulas": False})
    try:
        sheet = workbook.add_worksheet("usage")
        bold = workbook.add_format({"bold": True})
        sheet.write_row(0, 0, HEADERS, bold)
        sheet.freeze_panes(1, 0)
        line = 1
        for rows in export_chunks(filters):
            for row in rows:
                cells = [_xlsx_cell(row[field]) for _, field in COLUMNS]
                sheet.write_row(line, 0, cells)
                line += 1
    finally:
        workbook.close()
    return path


def _xlsx_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return float(value)  # a number in the sheet; the CSV and JSONL keep every digit
    if isinstance(value, bool):
        return value
    if isinstance(value, dt.date):
        return _isoformat(value)
    if isinstance(value, int):
        return value
    # Written as a string cell even if it looks like a formula (strings_to_formulas is off).
    return str(value)


async def xlsx_stream(filters: Filters) -> AsyncGenerator[bytes]:
    path = await sync_to_async(xlsx_write, thread_sensitive=True)(filters)
    try:
        with open(path, "rb") as file:  # noqa: ASYNC230  (a local temporary file, read in 64 KiB chunks)
            while block := file.read(FILE_CHUNK):
                yield block
    finally:
        os.unlink(path)
