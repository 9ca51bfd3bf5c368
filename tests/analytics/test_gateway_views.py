"""The gateway's requests on the Usage pages: the log's key, end-user, tag and session filters, its
totals, the record's attribution, and cost by API key and by end user from their rollups."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from decimal import Decimal
from typing import Any
from xml.etree import ElementTree

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from playground.analytics.exports import HEADERS
from playground.analytics.selectors.attribution import cost_by_end_user, cost_by_key
from playground.analytics.selectors.request_log import log_page, log_records
from playground.analytics.selectors.totals import log_totals
from playground.usage.models import UsageRecord
from tests.support.analytics import NOW, TRACE_ID, GatewayKnown, Known, body, filters_for
from tests.support.clients import client_for
from tests.support.clock import clock

pytestmark = pytest.mark.django_db


def _ids(gateway: GatewayKnown, *indexes: int) -> set[int]:
    return {gateway.records[i].pk for i in indexes}


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"key": "shop"}, (0, 1)),
        ({"key": "billing"}, (2,)),
        ({"end_user": "ana"}, (0, 2)),  # Bravo's "ana" is not Alpha's
        ({"end_user": "Ana"}, ()),  # exact, case included
        ({"tag": "prod"}, (0, 1)),
        ({"tag": "eu"}, (0,)),
        ({"tag": "pro"}, ()),  # a whole tag, never part of one
        ({"tag": "PROD"}, ()),
        ({"session": "s-1"}, (0, 2)),
        ({"path": "gateway"}, (0, 1, 2)),
        ({"key": "shop", "end_user": "ana"}, (0,)),
        ({"key": "shop", "tag": "prod", "status": "ok"}, (0, 1)),
        ({"end_user": "ana", "status": "upstream_error"}, (2,)),
    ],
)
def test_the_log_filters_by_key_end_user_tag_session_and_path(
    actors: Any, known: Known, gateway: GatewayKnown, params: dict[str, str], expected: tuple[int, ...]
) -> None:
    keys = {"shop": gateway.shop_bot.pk, "billing": gateway.billing_agent.pk}
    if "key" in params:
        params = {**params, "key": str(keys[params["key"]])}
    filters = filters_for(actors.owner, **params)

    listed = {record.pk for record in log_records(filters)}

    assert listed == _ids(gateway, *expected)
    # The keyset pages walk the same rows, one by one, none twice or missed.
    seen: list[int] = []
    cursor = ""
    while True:
        page = log_page(filters, cursor=cursor, size=1)
        seen += [record.pk for record in page.records]
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    assert sorted(seen) == sorted(listed)


def _summed(filters: Any) -> tuple[int, int, int, int, Decimal]:
    records = log_records(filters)
    return (
        records.count(),
        sum(r.prompt_tokens for r in records),
        sum(r.cached_tokens or 0 for r in records),
        sum(r.completion_tokens for r in records),
        sum((r.total_cost for r in records), Decimal(0)),
    )


@pytest.mark.parametrize(
    ("params", "reads_records"),
    [
        ({"key": "shop"}, False),
        ({"end_user": "ana"}, False),
        ({"key": "shop", "end_user": "ana"}, False),
        ({"key": "shop", "path": "gateway"}, False),
        ({"key": "shop", "path": "chat"}, False),
        ({"key": "shop", "model": "@local/gemma-3-270m"}, True),
        ({"end_user": "ana", "status": "ok"}, True),
        ({"key": "shop", "cached_share": "none"}, True),
        ({"tag": "prod"}, True),
        ({"session": "s-1"}, True),
    ],
)
def test_the_log_totals_under_gateway_filters_equal_summing_the_records(
    actors: Any, known: Known, gateway: GatewayKnown, params: dict[str, str], reads_records: bool
) -> None:
    if "key" in params:
        params = {**params, "key": str(gateway.shop_bot.pk)}
    filters = filters_for(actors.owner, **params)

    with CaptureQueriesContext(connection) as queries:
        totals = log_totals(filters)

    summed = _summed(filters)
    shown = (
        totals.requests,
        totals.prompt_tokens,
        totals.cached_tokens,
        totals.completion_tokens,
        totals.cost,
    )
    assert shown == summed
    read = " ".join(query["sql"] for query in queries.captured_queries)
    assert ("usage_usagerecord" in read) is reads_records, read


def test_another_teams_key_is_a_404_on_every_page_fragment_and_export(
    actors: Any, known: Known, gateway: GatewayKnown
) -> None:
    client = client_for(actors.owner)
    urls = [
        reverse("analytics:dashboard"),
        reverse("analytics:headline"),
        reverse("analytics:chart", args=["cost-by-end-user"]),
        reverse("analytics:log"),
        reverse("analytics:log-totals"),
        reverse("analytics:export", args=["csv"]),
    ]
    for key in (gateway.bravo_bot.pk, gateway.bravo_bot.pk + 1000):
        for url in urls:
            assert client.get(url, {"key": key}).status_code == 404, (url, key)
    assert client.get(reverse("analytics:log"), {"key": gateway.shop_bot.pk}).status_code == 200


def test_a_tag_with_a_comma_is_refused_in_place(actors: Any, known: Known) -> None:
    response = client_for(actors.owner).get(reverse("analytics:log"), {"tag": "a,b"})

    assert response.status_code == 400
    assert "One tag, without a comma." in response.content.decode()


def test_the_log_names_a_gateway_rows_key_and_end_user_with_links_that_narrow_to_them(
    actors: Any, known: Known, gateway: GatewayKnown
) -> None:
    with clock(NOW):
        html = client_for(actors.owner).get(reverse("analytics:log"), {"range": "24h"}).content.decode()

    key = gateway.shop_bot
    assert f'<a href="?range=24h&amp;key={key.pk}" class="log-key"' in html
    assert f"API key shop-bot ({key.prefix}…)" in html
    assert '<a href="?range=24h&amp;end_user=bo" class="log-end-user"' in html
    assert '<option value="gateway">Gateway</option>' in html
    assert f'<option value="{key.pk}">shop-bot</option>' in html
    assert "bravo-bot" not in html  # another team's key is never offered or shown


def test_the_record_page_shows_the_attribution_it_received(
    actors: Any, known: Known, gateway: GatewayKnown
) -> None:
    first = gateway.records[0]
    client = client_for(actors.owner)

    html = client.get(reverse("analytics:record-detail", args=[first.request_id])).content.decode()
    chat = client.get(reverse("analytics:record-detail", args=[known.records[0].request_id])).content.decode()

    assert "Sent through the gateway" in html and "Sent through the gateway" not in chat
    assert f"shop-bot <code>{gateway.shop_bot.prefix}…</code>" in html
    for shown in ("<code>ana</code>", "<code>s-1</code>", f"<code>{TRACE_ID}</code>", "<code>aff-1</code>"):
        assert shown in html
    assert '<span class="role-chip attribution-tag">prod</span>' in html
    assert '<span class="role-chip attribution-tag">eu</span>' in html
    assert f"<code>x-playground-request-id: {first.request_id}</code>" in html
    stored = UsageRecord.objects.get(pk=first.pk).metadata  # in the database's key order
    assert stored == {"order": 42, "note": "naïve <b>"}
    pretty = json.dumps(stored, indent=2, ensure_ascii=False)
    assert pretty.replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;") in html
    assert gateway.shop_bot.secret_sha256 not in html


def _cost(records: list[UsageRecord]) -> Decimal:
    return sum((record.total_cost for record in records), Decimal(0))


def test_cost_by_key_and_by_end_user_rank_the_period_from_their_rollups(
    actors: Any, known: Known, gateway: GatewayKnown
) -> None:
    g = gateway.records
    filters = filters_for(actors.owner)

    with CaptureQueriesContext(connection) as queries:
        by_key = cost_by_key(filters)
        by_end_user = cost_by_end_user(filters)

    assert [(row["label"], row["requests"], row["cost"]) for row in by_key] == [
        ("shop-bot", 2, _cost(g[0:2])),
        ("billing-agent", 1, _cost(g[2:3])),
    ]
    assert by_key[0]["cost"] == Decimal("0.00205")  # 0.00055 + 0.0015, as the table says
    assert by_key[0]["detail"] == f"{gateway.shop_bot.prefix}…"
    assert [(row["label"], row["requests"], row["cost"]) for row in by_end_user] == [
        ("bo", 1, _cost(g[1:2])),
        ("ana", 2, _cost([g[0], g[2]])),  # Bravo's "ana" is not in it
    ]
    assert not any("usage_usagerecord" in query["sql"] for query in queries.captured_queries)


def test_cost_by_end_user_of_one_key_and_by_key_of_one_end_user(
    actors: Any, known: Known, gateway: GatewayKnown
) -> None:
    g = gateway.records
    of_shop = cost_by_end_user(filters_for(actors.owner, key=str(gateway.shop_bot.pk)))
    of_ana = cost_by_key(filters_for(actors.owner, end_user="ana"))

    assert [(row["label"], row["cost"]) for row in of_shop] == [
        ("bo", g[1].total_cost),
        ("ana", g[0].total_cost),
    ]
    assert [(row["label"], row["cost"]) for row in of_ana] == [
        ("shop-bot", g[0].total_cost),
        ("billing-agent", g[2].total_cost),
    ]


def test_the_rest_beyond_the_top_is_one_other_row_and_the_total_holds(
    actors: Any, known: Known, gateway: GatewayKnown
) -> None:
    filters = filters_for(actors.owner)

    ranked = cost_by_end_user(filters, top=1)

    assert [row["label"] for row in ranked] == ["bo", "1 other end user"]
    assert ranked[1]["key"] is None and ranked[1]["requests"] == 2
    assert sum(row["cost"] for row in ranked) == _cost(gateway.records[:3])


def test_a_chart_or_headline_its_rollups_cannot_answer_says_so_instead_of_drawing(
    actors: Any, known: Known, gateway: GatewayKnown
) -> None:
    client = client_for(actors.owner)
    key = {"range": "24h", "key": str(gateway.shop_bot.pk)}
    with clock(NOW):
        tokens = client.get(reverse("analytics:chart", args=["tokens"]), key).content.decode()
        by_user = client.get(reverse("analytics:chart", args=["cost-by-end-user"]), key).content.decode()
        by_model = client.get(
            reverse("analytics:chart", args=["cost-by-key"]), {"range": "24h", "model": "x", "status": "ok"}
        ).content.decode()
        headline = client.get(reverse("analytics:headline"), key).content.decode()

    assert "Not kept per API key or end user" in tokens and "data-figure" not in tokens
    assert 'id="plot-cost-by-end-user" data-figure="{' in by_user
    assert "clear the model and status filters to see this" in by_model and "data-figure" not in by_model
    assert 'data-stat="spend"' in headline and 'data-stat="errors"' not in headline
    assert "Filtered by API key or end user" in headline
    assert "$0.00205" in headline  # shop-bot's spend


# --- exports ------------------------------------------------------------------------------------

GATEWAY_COLUMNS = ["api_key_name", "api_key_prefix", "end_user", "session", "tags", "metadata", "trace_id"]


def _xlsx_rows(data: bytes) -> list[dict[str, str]]:
    """The sheet's rows as {header: text} (XlsxWriter's constant-memory mode writes strings inline
    and leaves empty cells out, so each cell is placed by its reference)."""
    ns = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
    with zipfile.ZipFile(io.BytesIO(data)) as book:
        sheet = ElementTree.fromstring(book.read("xl/worksheets/sheet1.xml"))
    rows = []
    for row in sheet.iter(f"{ns}row"):
        cells = {}
        for cell in row.iter(f"{ns}c"):
            letters = "".join(ch for ch in cell.get("r", "") if ch.isalpha())
            column = 0
            for letter in letters:
                column = column * 26 + ord(letter) - ord("A") + 1
            cells[column - 1] = "".join(cell.itertext())
        rows.append(cells)
    headers = [rows[0][i] for i in sorted(rows[0])]
    return [{header: row.get(i, "") for i, header in enumerate(headers)} for row in rows]


def test_the_exports_carry_each_gateway_requests_key_end_user_session_tags_metadata_and_trace(
    actors: Any, known: Known, gateway: GatewayKnown
) -> None:
    client = client_for(actors.owner)
    first = gateway.records[0]
    with clock(NOW):
        exports = {
            fmt: body(
                client.get(reverse("analytics:export", args=[fmt]), {"range": "24h", "path": "gateway"})
            )
            for fmt in ("csv", "jsonl", "xlsx")
        }

    rows = list(csv.DictReader(io.StringIO(exports["csv"].decode().removeprefix("\ufeff"))))
    assert HEADERS[HEADERS.index("source") + 1 :][:7] == GATEWAY_COLUMNS
    assert len(rows) == 3  # Alpha's gateway requests, never Bravo's
    row = next(row for row in rows if row["request_id"] == str(first.request_id))  # x-playground-request-id
    assert [row[name] for name in GATEWAY_COLUMNS[:5]] == [
        "shop-bot",
        gateway.shop_bot.prefix,
        "ana",
        "s-1",
        "prod,eu",
    ]
    assert json.loads(row["metadata"]) == {"order": 42, "note": "naïve <b>"}
    assert "naïve" in row["metadata"]  # readable, not "na\u00efve", on SQLite too
    assert row["trace_id"] == TRACE_ID

    line = next(
        json.loads(text) for text in exports["jsonl"].decode().splitlines() if str(first.request_id) in text
    )
    assert line["metadata"] == {"order": 42, "note": "naïve <b>"}  # an object in JSON lines
    assert (line["api_key_name"], line["tags"], line["end_user"]) == ("shop-bot", "prod,eu", "ana")

    sheet = _xlsx_rows(exports["xlsx"])
    assert list(sheet[0]) == HEADERS
    cells = next(cells for cells in sheet[1:] if cells["request_id"] == str(first.request_id))
    assert (cells["api_key_name"], cells["tags"], cells["metadata"]) == (
        "shop-bot",
        "prod,eu",
        row["metadata"],
    )
    for data in exports.values():
        assert gateway.shop_bot.secret_sha256.encode() not in data
