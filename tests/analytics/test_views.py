"""Analytics pages: scoped to the user's teams (another team is a 404 everywhere), keyset pages, exports."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from playground.analytics import views
from playground.analytics.exports import HEADERS, formula_safe
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.usage.models import RequestPath, UsageRecord
from playground.usage.services import RequestContext
from tests.analytics.conftest import NOW, Known, body, clock, record_write

pytestmark = pytest.mark.django_db


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_dashboard_and_every_chart_fragment_render_for_a_member(actors: Any, known: Known) -> None:
    client = client_for(actors.teammate)
    with clock(NOW):
        page = client.get(reverse("analytics:dashboard"), {"range": "24h"})
        assert page.status_code == 200
        for name in views.CHARTS:
            fragment = client.get(
                reverse("analytics:chart", args=[name]), {"range": "24h", "team": actors.team.pk}
            )
            assert fragment.status_code == 200, name
            assert b"Show as table" in fragment.content
            if name != "what-if":
                assert f'id="plot-{name}" data-figure="{{'.encode() in fragment.content, name


def test_a_conversation_title_in_a_figure_is_escaped(actors: Any, known: Known) -> None:
    known.conversation.title = "</script><script>alert(1)</script>"
    known.conversation.save()
    with clock(NOW):
        fragment = client_for(actors.owner).get(
            reverse("analytics:chart", args=["top-conversations"]), {"range": "24h"}
        )

    assert b"<script>alert(1)" not in fragment.content
    assert b"&lt;/script&gt;&lt;script&gt;alert(1)" in fragment.content


@pytest.mark.parametrize(
    "url",
    [
        reverse("analytics:dashboard"),
        reverse("analytics:log"),
        reverse("analytics:chart", args=["cost"]),
        reverse("analytics:chart", args=["top-conversations"]),
        reverse("analytics:export", args=["csv"]),
        reverse("analytics:export", args=["jsonl"]),
        reverse("analytics:export", args=["xlsx"]),
    ],
)
def test_another_teams_id_is_a_404_on_every_page_fragment_and_export(
    actors: Any, known: Known, url: str
) -> None:
    response = client_for(actors.outsider).get(url, {"team": actors.team.pk, "range": "24h"})

    assert response.status_code == 404


def test_another_teams_record_is_a_404(actors: Any, known: Known) -> None:
    alpha_record = known.records[0]
    bravo_record = known.records[3]

    assert (
        client_for(actors.outsider)
        .get(reverse("analytics:record-detail", args=[alpha_record.request_id]))
        .status_code
        == 404
    )
    assert (
        client_for(actors.owner)
        .get(reverse("analytics:record-detail", args=[bravo_record.request_id]))
        .status_code
        == 404
    )


def test_the_detail_page_shows_every_field_and_the_filled_in_formula(actors: Any, known: Known) -> None:
    record = known.records[0]
    UsageRecord.objects.filter(pk=record.pk).update(
        request_body={"messages": [{"role": "user", "content": "hi"}]}
    )

    page = (
        client_for(actors.teammate)
        .get(reverse("analytics:record-detail", args=[record.request_id]))
        .content.decode()
    )

    for text in (
        "ray-2000",  # upstream request id
        "420 ms",
        "2600 ms",
        "(2,000 prompt - 1,500 cached)",
        "0.600000",  # the card's input price
        "0.0003000000",  # = the fresh input cost
        "0.0007500000",  # total
        "Alpha&#x27;s long chat",  # the conversation link
        "&quot;prompt_tokens&quot;: 2000",  # raw usage as received
        "&quot;content&quot;: &quot;hi&quot;",  # the request body
    ):
        assert text in page, text


def test_the_log_pages_by_keyset_with_no_row_twice_or_missed(
    actors: Any, known: Known, monkeypatch: Any
) -> None:
    monkeypatch.setattr("playground.analytics.records.PAGE_SIZE", 1)
    client = client_for(actors.owner)
    seen: list[str] = []
    query: dict[str, Any] = {"range": "24h", "sort": "cost"}
    with clock(NOW):
        for _ in range(5):
            page = client.get(reverse("analytics:log"), query)
            assert page.status_code == 200
            seen += [str(record.request_id) for record in page.context["page"].records]
            if not page.context["page"].next_cursor:
                break
            query = {**query, "after": page.context["page"].next_cursor}

    by_cost = sorted(known.records[:3], key=lambda r: -r.total_cost)
    assert seen == [str(r.request_id) for r in by_cost]


def test_a_forged_cursor_is_refused_plainly(actors: Any, known: Known) -> None:
    with clock(NOW):
        response = client_for(actors.owner).get(reverse("analytics:log"), {"range": "24h", "after": "bm9wZQ"})
    assert response.status_code == 400


def test_log_filters_for_cached_share_and_conversation(actors: Any, known: Known) -> None:
    client = client_for(actors.owner)
    with clock(NOW):
        most = client.get(reverse("analytics:log"), {"range": "24h", "cached_share": "most"}).context["page"]
        unknown = client.get(reverse("analytics:log"), {"range": "24h", "cached_share": "unknown"}).context[
            "page"
        ]
        conv = client.get(
            reverse("analytics:log"), {"range": "24h", "conversation": known.conversation.pk}
        ).context["page"]

    assert [r.pk for r in most.records] == [known.records[0].pk]
    assert [r.pk for r in unknown.records] == [known.records[2].pk]
    assert {r.pk for r in conv.records} == {known.records[0].pk, known.records[1].pk}


def test_the_log_groups_thousands_in_tokens_and_times(actors: Any, known: Known) -> None:
    with clock(NOW):
        html = client_for(actors.owner).get(reverse("analytics:log"), {"range": "24h"}).content.decode()

    assert '<td class="num">10,000</td>' in html and "8,000 ms" in html and "2,500 ms" in html
    assert '<td class="num">1,500</td>' in html  # cached tokens


def test_the_log_links_each_row_to_its_conversation_or_batch_item(actors: Any, known: Known) -> None:
    batch_context = RequestContext(
        team_id=actors.team.pk, user_id=actors.owner.pk, connection_id=None, model_id=ENGINE_MODEL_ID,
        path=RequestPath.BATCH, source="batch-item:42:2",
    )  # fmt: skip
    record_write(NOW - dt.timedelta(hours=1), batch_context, prompt=10, cached=0, out=5, ttft=1, latency=2)
    with clock(NOW):
        html = client_for(actors.owner).get(reverse("analytics:log"), {"range": "24h"}).content.decode()

    item_url = reverse("batches:item-detail", args=[42])
    assert f'<a href="{item_url}">Batch item 42, attempt 2</a>' in html
    conversation_url = reverse("chat:conversation-detail", args=[known.conversation.pk])
    assert f'<a href="{conversation_url}">Conversation #{known.conversation.pk}</a>' in html
    assert "batch-item:" not in html


def test_csv_export_has_the_documented_columns_and_only_the_teams_rows(actors: Any, known: Known) -> None:
    with clock(NOW):
        response = client_for(actors.owner).get(
            reverse("analytics:export", args=["csv"]), {"range": "24h", "bom": "1"}
        )

    text = body(response).decode("utf-8")
    assert text.startswith("\ufeff")
    rows = list(csv.DictReader(io.StringIO(text.removeprefix("\ufeff"))))
    assert list(rows[0]) == HEADERS
    assert len(rows) == 3 and {row["team"] for row in rows} == {"alpha"}
    first = next(row for row in rows if row["request_id"] == str(known.records[0].request_id))
    assert (first["input_cost_usd"], first["cached_input_cost_usd"], first["output_cost_usd"]) == (
        "0.0003000000",
        "0.0001500000",
        "0.0003000000",
    )
    assert first["price_card_label"].startswith("Priced as Kimi K2.5")
    assert first["model_id"] == "'@local/gemma-3-270m"  # a leading @ is escaped like any formula


def test_jsonl_and_xlsx_exports_stream_the_same_rows(actors: Any, known: Known) -> None:
    client = client_for(actors.owner)
    with clock(NOW):
        jsonl = body(client.get(reverse("analytics:export", args=["jsonl"]), {"range": "24h"})).decode()
        xlsx = body(client.get(reverse("analytics:export", args=["xlsx"]), {"range": "24h"}))

    lines = [json.loads(line) for line in jsonl.splitlines()]
    assert len(lines) == 3 and lines[0]["total_cost_usd"] == "0.0135000000"
    assert xlsx.startswith(b"PK")  # a zip: the workbook


@pytest.mark.parametrize(
    ("cell", "safe"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1+1", "'+1+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("plain text", "plain text"),
        ("", ""),
    ],
)
def test_formula_cells_are_escaped(cell: str, safe: str) -> None:
    assert formula_safe(cell) == safe


def test_an_error_text_that_is_a_formula_is_escaped_in_the_csv(actors: Any, known: Known) -> None:
    UsageRecord.objects.filter(pk=known.records[2].pk).update(error_text='=cmd|"/c calc"!A1')
    with clock(NOW):
        text = body(
            client_for(actors.owner).get(reverse("analytics:export", args=["csv"]), {"range": "24h"})
        ).decode()

    row = next(
        r for r in csv.DictReader(io.StringIO(text)) if r["request_id"] == str(known.records[2].request_id)
    )
    assert row["error_text"] == '\'=cmd|"/c calc"!A1'
