"""The CSV export: on PostgreSQL written by COPY, elsewhere by Python's csv writer, and the two
must agree cell for cell (and byte for byte) on hostile text, NULLs and every filter, in both
flavours; the data tools' flavour holds every value exactly as the JSONL does."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.urls import reverse

from playground.analytics.exports import (
    CSV_FLAVOURS,
    DATA,
    HEADERS,
    SPREADSHEET,
    csv_copy_pieces,
    csv_python_pieces,
    csv_stream,
)
from playground.analytics.filters import Filters
from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.providers.kinds import ConnectionKind
from playground.providers.models import ProviderConnection
from playground.usage.api_keys import api_key_issue
from playground.usage.models import UsageRecord, UsageStatus
from tests.support.analytics import NOW, Known, body, filters_for
from tests.support.clients import client_for
from tests.support.clock import clock

pytestmark = pytest.mark.django_db
postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="COPY is PostgreSQL's (make test-services); SQLite exports through Python's csv writer",
)

# Every way a cell can go wrong: formula starts, quotes, separators, line breaks, unicode,
# COPY's own markers, and the empty string (which must read back as NULL does: empty).
HOSTILE = [
    '=HYPERLINK("http://x","y")',
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "\t=1",
    "\r=1",
    'say "hi", then go',
    "line one\nline two",
    "line one\r\nline two",
    "naïve ☃ 日本語 🎉",
    " leading and trailing ",
    "'already quoted",
    "\\.",
    "\\N",
    "NULL",
    "",
]


@dataclass
class Hostile:
    known: Known
    records: list[UsageRecord]


def _card(label: str, *, cached: Decimal | None) -> PriceCard:
    return PriceCard.objects.create(
        model=CatalogModel.objects.order_by("pk")[0],
        effective_from=dt.date(2026, 3, 1),
        input_per_m=Decimal("0.123456"),
        cached_input_per_m=cached,
        output_per_m=Decimal("123456.000001"),
        label=label,
        team=None,
    )


@pytest.fixture
def hostile(actors: Any, known: Known, catalogue: None) -> Hostile:
    """The known rows plus one record per hostile string, spread over every text column."""
    user = User.objects.create_user("=cmd|' /C calc'!A0", password="x")
    connection_ = ProviderConnection.objects.create(
        team=actors.team, name='+conn, "quoted"\nnext', kind=ConnectionKind.OPENAI_COMPATIBLE
    )
    no_cache = _card("@card with no cache discount", cached=None)
    key, _ = api_key_issue(
        team_id=actors.team.pk, name='=key "quoted",\nnext', connection_id=None, created_by_id=None
    )
    records = []
    for index, text in enumerate(HOSTILE):
        records.append(
            UsageRecord.objects.create(
                team=actors.team,
                user=user if index % 3 else None,  # None: a deleted user
                connection=connection_ if index % 2 else None,
                model_id=text or "@cf/x",
                path="batch" if index % 2 else "chat",
                status=UsageStatus.UPSTREAM_ERROR if index % 4 == 0 else UsageStatus.OK,
                streamed=bool(index % 2),
                affinity_key=text,
                source=f"{text}:{index}" if text else "",
                prompt_tokens=1000 + index,
                cached_tokens=None if index % 5 == 0 else index * 100,
                completion_tokens=index,
                reasoning_tokens=None if index % 2 else index,
                usage_implausible=index % 7 == 0,
                price_card=None if index % 6 == 0 else no_cache,
                input_cost=Decimal("12345678.1234567890") if index == 1 else Decimal("0.0000000001"),
                cached_input_cost=Decimal(0),
                output_cost=Decimal("0.5"),
                total_cost=Decimal("12345678.6234567891") if index == 1 else Decimal("0.5000000001"),
                ttft_ms=None if index % 2 else 10 * index,
                latency_ms=None if index % 3 else 20 * index,
                upstream_request_id=text,
                http_status=None if index % 2 else 500,
                error_code=text[:40],
                error_text=text,
                # what a gateway request says about itself, as hostile as the rest
                api_key=key if index % 2 else None,
                end_user=text,
                session=text[::-1],
                tags=f",{text.replace(',', ';')},@b," if text else "",
                metadata=_metadata(text, index),
                trace_id=f"{index:032x}" if index % 3 else "",
            )
        )
    # Distinct times, some with microseconds and some without (isoformat would drop zeros).
    for index, record in enumerate(records):
        at = NOW - dt.timedelta(hours=1, minutes=index) + dt.timedelta(microseconds=123456 * (index % 2))
        UsageRecord.objects.filter(pk=record.pk).update(created_at=at)
    # Two records in one microsecond: the order falls back to the id, newest first.
    UsageRecord.objects.filter(pk=records[3].pk).update(created_at=NOW - dt.timedelta(hours=1, minutes=2))
    return Hostile(known=known, records=records)


def _metadata(text: str, index: int) -> dict[str, Any] | None:
    """None, or an object holding the text, numbers a float would write otherwise than the
    database (1e-07), every kind of JSON value and escapes of every sort."""
    if index % 4 == 3:
        return None
    return {
        "text": text,
        "index": index,
        "tiny": 1e-07,
        "big": 12345678901234567890,
        "nested": [True, None, {"é": "naïve ☃ 🎉"}],
        "escapes": '\u00e9 \\u00e9 \\ " \u0001 \t \u2028',  # é, then a backslash and "u00e9"
    }


def _rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


def _both(filters: Filters, flavour: str = SPREADSHEET) -> tuple[bytes, bytes]:
    copied = b"".join(csv_copy_pieces(filters, flavour=flavour))
    return copied, b"".join(csv_python_pieces(filters, flavour=flavour))


FILTER_CASES = [
    {},
    {"status": "upstream_error"},
    {"path": "batch"},
    {"affinity": "on"},
    {"affinity": "off"},
    {"cached_share": "none"},
    {"cached_share": "some"},
    {"cached_share": "most"},
    {"cached_share": "unknown"},
    {"model": ENGINE_MODEL_ID},
]


@postgresql_only
@pytest.mark.parametrize("flavour", CSV_FLAVOURS)
@pytest.mark.parametrize(
    "params", FILTER_CASES, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "all"
)
def test_copy_writes_what_the_python_writer_writes(
    actors: Any, hostile: Hostile, params: dict[str, str], flavour: str
) -> None:
    filters = filters_for(actors.owner, **params)

    copied, written = _both(filters, flavour)

    assert _rows(copied) == _rows(written)
    assert copied == written  # the same quoting and line ends, too
    assert len(_rows(copied)) > 1  # every filter case keeps some rows


@postgresql_only
def test_copy_writes_every_kind_of_cell_as_documented(actors: Any, hostile: Hostile) -> None:
    rows = _rows(b"".join(csv_copy_pieces(filters_for(actors.owner))))
    header, body = rows[0], [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]
    by_id = {row["request_id"]: row for row in body}
    assert header == HEADERS
    assert len(body) == len(HOSTILE) + 3  # the team's known rows too, never Bravo's
    assert [row["created_at"] for row in body] == sorted((row["created_at"] for row in body), reverse=True)

    first = by_id[str(hostile.records[0].request_id)]  # "=HYPERLINK(...)", no user, no card
    assert first["model_id"] == first["affinity_key"] == '\'=HYPERLINK("http://x","y")'
    assert (first["user"], first["connection"], first["price_card_id"], first["price_card_label"]) == (
        "",
    ) * 4
    assert first["created_at"] == "2026-11-20T11:00:00.000000+00:00"
    assert (first["cached_tokens"], first["ttft_ms"], first["streamed"]) == ("", "0", "false")
    assert first["usage_implausible"] == "true"

    second = by_id[str(hostile.records[1].request_id)]  # "+1+1", a user, a connection, a card, a key
    second_key = hostile.records[1].api_key
    assert second_key is not None
    assert second["user"] == "'=cmd|' /C calc'!A0"
    assert second["connection"] == '\'+conn, "quoted"\nnext'
    assert second["created_at"] == "2026-11-20T10:59:00.123456+00:00"
    assert (second["input_cost_usd"], second["total_cost_usd"]) == (
        "12345678.1234567890",
        "12345678.6234567891",
    )
    assert (second["input_per_m_usd"], second["cached_input_per_m_usd"]) == ("0.123456", "")
    assert (second["output_per_m_usd"], second["price_card_effective_from"]) == (
        "123456.000001",
        "2026-03-01",
    )
    assert second["price_card_label"] == "'@card with no cache discount"
    assert (second["streamed"], second["http_status"], second["reasoning_tokens"]) == ("true", "", "")

    # The gateway's columns: the key's name and prefix (never its hash), the tags as "a,b", the
    # metadata as the database's JSON text; guarded like every other text.
    assert (first["api_key_name"], first["api_key_prefix"]) == ("", "")
    assert first["end_user"] == '\'=HYPERLINK("http://x","y")'
    assert first["tags"] == '\'=HYPERLINK("http://x";"y"),@b'
    assert json.loads(first["metadata"])["text"] == '=HYPERLINK("http://x","y")'
    assert first["trace_id"] == ""
    assert (second["api_key_name"], second["api_key_prefix"]) == ('\'=key "quoted",\nnext', second_key.prefix)
    assert second["session"] == "1+1+" and second["trace_id"] == "1".rjust(32, "0")
    assert second["metadata"].startswith('{"big": 12345678901234567890, ')  # jsonb's own key order
    assert '"tiny": 0.0000001' in second["metadata"]  # as stored, not as a float would write it
    assert '"escapes": "é \\\\u00e9 \\\\ \\" \\u0001 \\t \u2028"' in second["metadata"]
    assert second_key.secret_sha256 not in b"".join(csv_copy_pieces(filters_for(actors.owner))).decode()

    cells = {by_id[str(record.request_id)]["error_text"] for record in hostile.records}
    assert cells == {
        "'=HYPERLINK(\"http://x\",\"y\")", "'+1+1", "'-2+3", "'@SUM(A1)", "'\t=1", "'\r=1",
        'say "hi", then go', "line one\nline two", "line one\r\nline two", "naïve ☃ 日本語 🎉",
        " leading and trailing ", "'already quoted", "\\.", "\\N", "NULL", "",
    }  # fmt: skip


@postgresql_only
def test_the_outsiders_copy_holds_only_their_own_teams_rows(actors: Any, hostile: Hostile) -> None:
    filters = filters_for(actors.outsider)

    copied, written = _both(filters)

    rows = _rows(copied)
    assert copied == written
    assert [row[HEADERS.index("team")] for row in rows[1:]] == ["bravo"]


def test_the_csv_view_ends_lines_with_newline_and_times_with_microseconds(
    actors: Any, hostile: Hostile
) -> None:
    client = client_for(actors.owner)
    with clock(NOW):
        response = client.get(reverse("analytics:export", args=["csv"]), {"range": "24h"})

    data = body(response)
    assert data.startswith("\ufeff".encode())
    assert data.endswith(b"\n") and not data.endswith(b"\r\n")  # COPY's line end on both profiles
    rows = _rows(data.removeprefix("\ufeff".encode()))
    assert rows[0] == HEADERS and len(rows) == len(HOSTILE) + 4
    assert all(
        len(row[HEADERS.index("created_at")]) == len("2026-11-20T11:00:00.000000+00:00") for row in rows[1:]
    )


# --- closing early ---------------------------------------------------------------------------------

BULK = 3000  # about 3 MB of CSV: many pieces


def _bulk(actors: Any) -> None:
    with clock(NOW - dt.timedelta(hours=2)):
        UsageRecord.objects.bulk_create(
            UsageRecord(
                team=actors.team,
                model_id="@cf/bulk",
                status=UsageStatus.OK,
                prompt_tokens=index,
                error_text="x" * 900,
            )
            for index in range(BULK)
        )


async def _first_piece_then_close(filters: Filters) -> bytes:
    stream = csv_stream(filters, flavour=DATA)  # the spreadsheets' first piece is only their BOM
    first = await anext(stream)
    await stream.aclose()
    return first


def _closing_early_leaves_the_connection_working(actors: Any) -> None:
    _bulk(actors)
    filters = filters_for(actors.owner)

    first = async_to_sync(_first_piece_then_close)(filters)

    assert first.startswith(b"request_id,created_at,") and first.count(b"\n") < BULK
    # The same connection answers at once, and a whole export still works on it.
    assert UsageRecord.objects.filter(team=actors.team).count() == BULK
    whole = b"".join(csv_copy_pieces(filters))
    assert len(_rows(whole)) == BULK + 1


@postgresql_only
def test_closing_the_stream_early_inside_a_transaction_leaves_it_usable(actors: Any) -> None:
    assert connection.in_atomic_block  # the test's own transaction, as under ATOMIC_REQUESTS
    _closing_early_leaves_the_connection_working(actors)


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_closing_the_stream_early_in_autocommit_leaves_the_connection_usable(actors: Any) -> None:
    assert not connection.in_atomic_block
    _closing_early_leaves_the_connection_working(actors)
    assert connection.get_autocommit()
    with transaction.atomic():
        assert UsageRecord.objects.count() == BULK


def _as_in_jsonl(value: Any) -> Any:
    """A JSONL value as its CSV cell must read: null is an empty field, true is "true"; the
    metadata object as its JSON text, compared parsed."""
    if value is None or isinstance(value, str | dict):
        return value
    return json.dumps(value)


def test_the_data_tools_csv_holds_every_value_exactly_as_the_jsonl(actors: Any, hostile: Hostile) -> None:
    client = client_for(actors.owner)
    with clock(NOW):
        response = client.get(reverse("analytics:export", args=["csv"]), {"range": "24h", "flavour": DATA})
        jsonl = body(client.get(reverse("analytics:export", args=["jsonl"]), {"range": "24h"})).decode()

    assert response["Content-Type"] == "text/csv; charset=utf-8; header=present"
    assert response["Content-Disposition"].endswith('-data.csv"')
    data = body(response)
    assert data.startswith(b"request_id,created_at,team,") and data.endswith(b"\r\n")  # no BOM; CRLF
    # QUOTE_NOTNULL reads an unquoted empty field as None and a quoted one as "": null and "" apart.
    rows: list[list[Any]] = list(
        csv.reader(io.StringIO(data.decode(), newline=""), quoting=csv.QUOTE_NOTNULL)
    )
    metadata = HEADERS.index("metadata")
    for row in rows[1:]:
        row[metadata] = json.loads(row[metadata]) if row[metadata] is not None else None
    lines = [json.loads(line) for line in jsonl.split("\n") if line]
    assert rows[0] == HEADERS and len(rows) == len(lines) + 1 == len(HOSTILE) + 4
    assert rows[1:] == [[_as_in_jsonl(value) for value in line.values()] for line in lines]
    cells = {row[HEADERS.index("model_id")] for row in rows[1:]}
    assert {ENGINE_MODEL_ID, '=HYPERLINK("http://x","y")', "@SUM(A1)"} <= cells  # never guarded
    empty_text = next(row for row in rows[1:] if row[HEADERS.index("affinity_key")] == "")
    assert empty_text[HEADERS.index("user")] is None  # "" and null stay apart in one row
