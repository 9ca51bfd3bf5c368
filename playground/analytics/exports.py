"""Streamed exports of the filtered request log: CSV, JSONL and XLSX.

Memory stays flat whatever the row count: rows are read in keyset chunks
(`records.export_chunks`) and each chunk is encoded and sent before the next is read. The
streams are async generators that fetch each chunk in a thread, because Django's ASGI
handler buffers a synchronous iterator whole before sending it.

XLSX cannot be written as a byte stream (it is a zip with a directory at the end), so it is
written with XlsxWriter's `constant_memory` mode (one row in memory at a time) into a
temporary file, which is then streamed and deleted.

Columns are documented in docs/usage-exports.md; `COLUMNS` here is their single source.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async

from playground.analytics.filters import Filters
from playground.analytics.records import export_chunks

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
    ("source", "source"),
    ("prompt_tokens", "prompt_tokens"),
    ("cached_tokens", "cached_tokens"),
    ("completion_tokens", "completion_tokens"),
    ("reasoning_tokens", "reasoning_tokens"),
    ("usage_source", "usage_source"),
    ("usage_implausible", "usage_implausible"),
    ("price_card_id", "price_card_id"),
    ("price_card_label", "price_card__label"),
    ("price_card_effective_from", "price_card__effective_from"),
    ("input_per_m_usd", "price_card__input_per_m"),
    ("cached_input_per_m_usd", "price_card__cached_input_per_m"),
    ("output_per_m_usd", "price_card__output_per_m"),
    ("input_cost_usd", "input_cost"),
    ("cached_input_cost_usd", "cached_input_cost"),
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


def _iso(value: Any) -> Any:
    return "" if value is None else value.isoformat()


def _boolean(value: Any) -> Any:
    return "" if value is None else ("true" if value else "false")


# One converter per column, chosen once (a type test per cell would halve the export's speed).
_DECIMALS = {"input_cost", "cached_input_cost", "output_cost", "total_cost"}
_NUMBERS = {
    "conversation_id", "prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens",
    "price_card_id", "ttft_ms", "latency_ms", "http_status",
}  # fmt: skip
CSV_CONVERTERS = [
    _decimal
    if field in _DECIMALS or field.endswith("_per_m")
    else _number
    if field in _NUMBERS
    else _iso
    if field in {"created_at", "price_card__effective_from"}
    else _boolean
    if field in {"streamed", "usage_implausible"}
    else _text
    for _, field in COLUMNS
]
FIELDS = [field for _, field in COLUMNS]


def csv_row(row: dict[str, Any]) -> list[Any]:
    return [convert(row[field]) for convert, field in zip(CSV_CONVERTERS, FIELDS, strict=True)]


def json_row(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for header, field in COLUMNS:
        value = row[field]
        if isinstance(value, Decimal):
            value = format(value, "f")  # exact: a float would round costs
        elif hasattr(value, "isoformat"):
            value = value.isoformat()
        elif field == "request_id":
            value = str(value)
        out[header] = value
    return out


async def _chunks(filters: Filters) -> AsyncIterator[list[dict[str, Any]]]:
    chunks = export_chunks(filters)
    fetch: Callable[[], list[dict[str, Any]] | None] = lambda: next(chunks, None)  # noqa: E731
    while True:
        rows = await sync_to_async(fetch, thread_sensitive=True)()
        if rows is None:
            return
        yield rows


async def csv_stream(filters: Filters, *, bom: bool = False) -> AsyncIterator[bytes]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    if bom:
        buffer.write(BOM)
    writer.writerow(HEADERS)
    async for rows in _chunks(filters):
        for row in rows:
            writer.writerow(csv_row(row))
        yield buffer.getvalue().encode()
        buffer.seek(0)
        buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue().encode()


async def jsonl_stream(filters: Filters) -> AsyncIterator[bytes]:
    async for rows in _chunks(filters):
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
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, int):
        return value
    # Written as a string cell even if it looks like a formula (strings_to_formulas is off).
    return str(value)


async def xlsx_stream(filters: Filters) -> AsyncIterator[bytes]:
    path = await sync_to_async(xlsx_write, thread_sensitive=True)(filters)
    try:
        with open(path, "rb") as file:  # noqa: ASYNC230  (a local temporary file, read in 64 KiB chunks)
            while block := file.read(FILE_CHUNK):
                yield block
    finally:
        os.unlink(path)
