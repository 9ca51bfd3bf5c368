"""Analytics pages: scoped to the user's teams (another team is a 404 everywhere), keyset pages, exports."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from playground.analytics import views
from playground.analytics.exports import HEADERS, formula_safe
from playground.analytics.selectors.request_log import log_page
from playground.analytics.selectors.totals import log_totals
from playground.batches.models import Batch, BatchItem, BatchPath
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26
from playground.chat.models import Conversation
from playground.presets.models import Preset, PresetVersion
from playground.usage.calls.context import RequestContext
from playground.usage.models import RequestPath, ScoreKind, UsageRecord, UsageStatus
from playground.usage.rollups import rollups_rebuild
from playground.usage.scores import ScoreInput, score_put_by_person
from tests.support.analytics import NOW, GatewayKnown, Known, body, filters_for, record_write
from tests.support.clients import client_for
from tests.support.clock import clock

pytestmark = pytest.mark.django_db


def test_the_dashboard_and_every_chart_fragment_render_for_a_member(
    actors: Any, known: Known, gateway: GatewayKnown
) -> None:
    client = client_for(actors.teammate)
    # A few requests sent by a preset version, so its ranking has bars to draw.
    named = UsageRecord.objects.filter(team=actors.team).values_list("pk", flat=True)[:3]
    UsageRecord.objects.filter(pk__in=list(named)).update(preset_version_id=99)
    rollups_rebuild()
    # And a score, so the chart of scores by version has bars to draw.
    scored = UsageRecord.objects.get(pk=named[0])
    score_put_by_person(user_id=actors.owner.pk, record=scored, given=ScoreInput(ScoreKind.RATING, 4))
    # And values the redactor replaced in one of them, so the redactions chart has bars to draw.
    UsageRecord.objects.filter(pk=named[1]).update(redactions={"email": 2, "card": 1})
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
        reverse("analytics:focus-export"),
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
    monkeypatch.setattr("playground.analytics.selectors.request_log.PAGE_SIZE", 1)
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
            reverse("analytics:log"), {"range": "24h", "conversation": str(known.conversation.pk)}
        ).context["page"]

    assert [r.pk for r in most.records] == [known.records[0].pk]
    assert [r.pk for r in unknown.records] == [known.records[2].pk]
    assert {r.pk for r in conv.records} == {known.records[0].pk, known.records[1].pk}


def test_the_log_groups_thousands_in_tokens_and_times(actors: Any, known: Known) -> None:
    with clock(NOW):
        html = client_for(actors.owner).get(reverse("analytics:log"), {"range": "24h"}).content.decode()

    assert '<td class="num">10,000</td>' in html  # prompt tokens
    assert '<td class="num">2,500</td>' in html and '<td class="num">8,000</td>' in html  # TTFT, latency
    assert '<th scope="col" class="num">TTFT ms</th>' in html
    assert '<td class="num">1,500</td>' in html  # cached tokens


def test_the_log_and_the_record_page_name_each_source_through_the_registry(actors: Any, known: Known) -> None:
    batch = Batch.objects.create(
        team=actors.team,
        model_id=ENGINE_MODEL_ID,
        input_kind="jsonl",
        path=BatchPath.CONCURRENT,
        path_reason="-",
    )
    item = BatchItem.objects.create(batch=batch, index=0, line=1, request={"messages": []}, attempt=2)
    gone = Conversation.objects.create(
        team=actors.team, user=actors.owner, model_id=ENGINE_MODEL_ID, title="Gone"
    )

    def write(**more: Any) -> UsageRecord:
        context = RequestContext(
            team_id=actors.team.pk,
            user_id=actors.owner.pk,
            connection_id=None,
            model_id=ENGINE_MODEL_ID,
            **more,
        )
        return record_write(
            NOW - dt.timedelta(hours=1), context, prompt=10, cached=0, out=5, ttft=1, latency=2
        )

    write(path=RequestPath.BATCH, source=item.source)
    gone_record = write(conversation_id=gone.pk)
    write(conversation_id=known.other_conversation.pk)  # another team's id: never named here
    gone_id = gone.pk
    gone.delete()
    with clock(NOW):
        html = client_for(actors.owner).get(reverse("analytics:log"), {"range": "24h"}).content.decode()
        detail = client_for(actors.owner).get(
            reverse("analytics:record-detail", args=[gone_record.request_id])
        )

    item_url = reverse("batches:item-detail", args=[item.pk])
    assert f'<a href="{item_url}">Batch item {item.pk}, attempt 2</a>' in html
    conversation_url = reverse("chat:conversation-detail", args=[known.conversation.pk])
    assert f'<a href="{conversation_url}">Conversation #{known.conversation.pk}</a>' in html
    # Unlinked: the conversation is gone, and Bravo's is not Alpha's to see.
    assert f'<td class="log-wrap">Conversation #{gone_id} (deleted)</td>' in html
    assert f'<td class="log-wrap">Conversation #{known.other_conversation.pk} (deleted)</td>' in html
    assert "Bravo secret" not in html
    assert reverse("chat:conversation-detail", args=[known.other_conversation.pk]) not in html
    assert "batch-item:" not in html
    assert f"<dd>Conversation #{gone_id} (deleted)</dd>" in detail.content.decode()


def test_the_spreadsheet_csv_has_a_bom_the_documented_columns_and_only_the_teams_rows(
    actors: Any, known: Known
) -> None:
    with clock(NOW):
        response = client_for(actors.owner).get(reverse("analytics:export", args=["csv"]), {"range": "24h"})

    assert response["Content-Disposition"].endswith('-spreadsheet.csv"')
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
    assert first["model_id"] == "'" + ENGINE_MODEL_ID  # a leading @ is escaped like any formula


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

    rows = csv.DictReader(io.StringIO(text.removeprefix("\ufeff")))
    row = next(r for r in rows if r["request_id"] == str(known.records[2].request_id))
    assert row["error_text"] == '\'=cmd|"/c calc"!A1'


def test_an_unknown_csv_flavour_is_refused_on_the_apps_own_error_page(actors: Any, known: Known) -> None:
    with clock(NOW):
        response = client_for(actors.owner).get(
            reverse("analytics:export", args=["csv"]), {"range": "24h", "flavour": "excel"}
        )

    assert response.status_code == 400
    page = response.content.decode()
    assert "Unknown CSV flavour &#x27;excel&#x27;: use spreadsheet or data." in page
    assert "error-card" in page and "Error 400" in page


# --- headline figures and the log's totals ----------------------------------------------------


def tiles_of(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-stat="(\w+)".*?<span class="stat-value">([^<]*)</span>', html, re.S))


def test_the_headline_figures_add_up_the_filtered_period(actors: Any, known: Known) -> None:
    with clock(NOW):
        response = client_for(actors.teammate).get(reverse("analytics:headline"), {"range": "24h"})

    html = response.content.decode()

    assert tiles_of(html) == {
        "spend": "$0.0154",  # 0.00075 + 0.0012 + 0.0135, to three significant digits
        "requests": "3",
        "tokens": "14,300",  # 13,000 in + 1,300 out
        "cached": "50.0%",  # 1,500 of the 3,000 input tokens whose cache figure is known
        "savings": "$0.00075",  # 1,500 cached x ($0.60 - $0.10) per M
        "errors": "33.3%",  # the upstream error
        "ttft": "875 ms",  # the middle of 420, 900 and 2,500 ms, in its [750, 1000) bucket
    }
    assert "13,000 in · 1,300 out" in html and "1 of 3 requests" in html


def test_the_unpriced_requests_the_headline_names_are_only_those_that_were_sent(
    actors: Any, known: Known
) -> None:
    """A request refused before it was sent (a budget, a rate) cost nothing: it is not one the
    spend leaves out. One sent to a model no card prices is, errors included."""
    context = RequestContext(
        team_id=actors.team.pk, user_id=actors.owner.pk, connection_id=None, model_id="x/raw"
    )
    at = NOW - dt.timedelta(hours=2)
    for status in (UsageStatus.OK, UsageStatus.UPSTREAM_ERROR, UsageStatus.REJECTED, UsageStatus.REJECTED):
        record_write(at, context, prompt=100, cached=None, out=10, ttft=300, latency=900, status=status)

    with clock(NOW):
        html = client_for(actors.owner).get(reverse("analytics:headline"), {"range": "24h"}).content.decode()

    assert "2 unpriced requests not in it" in html


def test_the_record_page_and_the_log_name_the_preset_version_that_sent_a_request(
    actors: Any, known: Known
) -> None:
    version = PresetVersion.objects.create(
        preset=Preset.objects.create(team=actors.team, name="Triage"), number=3, model_id="m", setup={}
    )
    record = known.records[0]
    UsageRecord.objects.filter(pk=record.pk).update(preset_version_id=version.pk)
    client = client_for(actors.owner)

    page = client.get(reverse("analytics:record-detail", args=[record.request_id])).content.decode()
    link = reverse("presets:preset-detail", args=[version.preset_id])
    assert f'<dd id="record-preset"><a href="{link}#version-3">Triage v3</a></dd>' in page
    with clock(NOW):
        log = client.get(reverse("analytics:log"), {"range": "7d"}).content.decode()
    assert log.count('class="badge log-preset"') == 1 and ">Triage v3</span>" in log

    version.preset.delete()  # the record stays; the page says what it was
    page = client.get(reverse("analytics:record-detail", args=[record.request_id])).content.decode()
    assert "a preset version since deleted" in page


def test_the_headline_follows_the_filters(actors: Any, known: Known) -> None:
    with clock(NOW):
        html = (
            client_for(actors.owner)
            .get(reverse("analytics:headline"), {"range": "24h", "status": "ok", "user": actors.teammate.pk})
            .content.decode()
        )

    tiles = tiles_of(html)
    shown = (tiles["spend"], tiles["requests"], tiles["errors"], tiles["ttft"])
    assert shown == ("$0.0012", "1", "0.0%", "875 ms")


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, (3, 13000, 1500, 1300, "0.01545")),
        ({"status": "ok"}, (2, 3000, 1500, 300, "0.00195")),
        ({"cached_share": "none"}, (1, 1000, 0, 200, "0.0012")),  # from the rollups' cache state
        ({"cached_share": "most"}, (1, 2000, 1500, 100, "0.00075")),  # from the records
        ({"cached_share": "some"}, (0, 0, 0, 0, "0")),
        ({"conversation": "A"}, (2, 3000, 1500, 300, "0.00195")),  # from the records
        ({"model": KIMI_K26, "affinity": "off"}, (1, 10000, 0, 1000, "0.0135")),
    ],
    ids=lambda value: ",".join(value) if isinstance(value, dict) else None,
)
def test_the_log_totals_count_every_page_of_the_filtered_set(
    actors: Any, known: Known, params: dict[str, str], expected: tuple[Any, ...]
) -> None:
    if params.get("conversation"):
        params = {**params, "conversation": str(known.conversation.pk)}
    filters = filters_for(actors.owner, **params)

    totals = log_totals(filters)

    got = (totals.requests, totals.prompt_tokens, totals.cached_tokens, totals.completion_tokens, totals.cost)
    assert got == (*expected[:4], Decimal(expected[4]))
    records = log_page(filters, size=1000).records
    assert totals.requests == len(records) and totals.cost == sum((r.total_cost for r in records), Decimal(0))


def test_the_log_shows_its_totals_row_for_every_page(actors: Any, known: Known, monkeypatch: Any) -> None:
    monkeypatch.setattr("playground.analytics.selectors.request_log.PAGE_SIZE", 1)
    client = client_for(actors.owner)
    with clock(NOW):
        page = client.get(reverse("analytics:log"), {"range": "24h"}).content.decode()
        totals = client.get(reverse("analytics:log-totals"), {"range": "24h"}).content.decode()

    assert 'id="log-totals" hx-get="/usage/log/totals/?range=24h' in page
    assert "All 3 requests of these filters" in totals
    cells = re.findall(r'<td class="num">([^<]*)</td>', totals)
    assert cells == ["13,000", "1,500", "1,300", "$0.0154"]


def test_another_teams_totals_are_a_404(actors: Any, known: Known) -> None:
    for name in ("analytics:headline", "analytics:log-totals"):
        response = client_for(actors.outsider).get(reverse(name), {"team": actors.team.pk, "range": "24h"})
        assert response.status_code == 404


# --- every control in the URL -------------------------------------------------------------------


def test_the_filter_form_gets_only_the_pages_content_and_a_history_restore_the_page(
    actors: Any, known: Known
) -> None:
    client = client_for(actors.owner)
    with clock(NOW):
        swapped = client.get(reverse("analytics:dashboard"), {"range": "24h"}, headers={"HX-Request": "true"})
        restored = client.get(
            reverse("analytics:dashboard"),
            {"range": "24h"},
            headers={"HX-Request": "true", "HX-History-Restore-Request": "true"},
        )
        log = client.get(reverse("analytics:log"), {"range": "24h"}, headers={"HX-Request": "true"})

    for part in (swapped, log):
        html = part.content.decode()
        assert html.lstrip().startswith('<div class="analytics-layout" id="analytics"')
        assert "<html" not in html
    assert "<html" in restored.content.decode()
    assert 'hx-get="/usage/headline/?range=24h"' in swapped.content.decode()


def test_invalid_filters_are_shown_in_place_to_the_filter_form(actors: Any, known: Known) -> None:
    query = {"range": "custom", "start": "2026-11-20"}
    client = client_for(actors.owner)

    swapped = client.get(reverse("analytics:dashboard"), query, headers={"HX-Request": "true"})
    plain = client.get(reverse("analytics:dashboard"), query)

    assert swapped.status_code == 200 and plain.status_code == 400  # htmx swaps only a 2xx
    assert "A custom range needs a start and an end date." in swapped.content.decode()


def test_choosing_a_grouping_or_a_card_pushes_the_dashboards_url_with_it(actors: Any, known: Known) -> None:
    client = client_for(actors.owner)
    url = reverse("analytics:chart", args=["cost"])
    with clock(NOW):
        loaded = client.get(url, {"range": "24h", "group": "model"}, headers={"HX-Request": "true"})
        chosen = client.get(
            url, {"range": "24h", "group": "user"}, headers={"HX-Request": "true", "HX-Trigger-Name": "group"}
        )
        repriced = client.get(
            reverse("analytics:chart", args=["what-if"]),
            {"range": "24h", "card": "nocache"},  # drawn before the grouping changed
            headers={
                "HX-Request": "true",
                "HX-Trigger-Name": "card",
                "HX-Current-URL": "http://testserver/usage/?range=24h&group=user&card=7",
            },
        )

    assert "HX-Push-Url" not in loaded  # a chart loading with the page leaves the address alone
    assert chosen["HX-Push-Url"] == "/usage/?range=24h&group=user"
    assert repriced["HX-Push-Url"] == "/usage/?range=24h&group=user&card=nocache"
    html = chosen.content.decode()  # each button adds its own value to the query
    assert 'value="user" class="is-current" aria-pressed="true" hx-get="/usage/charts/cost/?range=24h"' in (
        html
    )


def test_the_page_keeps_the_chart_choices_in_its_form_and_links(actors: Any, known: Known) -> None:
    with clock(NOW):
        html = (
            client_for(actors.owner)
            .get(
                reverse("analytics:dashboard"),
                {"range": "24h", "group": "user", "card": "nocache", "model": ""},
            )
            .content.decode()
        )

    assert '<input type="hidden" name="group" id="filter-group" value="user">' in html
    assert '<input type="hidden" name="card" id="filter-card" value="nocache">' in html
    assert 'href="/usage/log/?range=24h&amp;group=user&amp;card=nocache" data-keep-query' in html
    assert 'id="range-24h" value="24h" checked' in html
