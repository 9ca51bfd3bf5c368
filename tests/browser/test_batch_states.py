"""The batch list and detail pages at 1280 x 800: every column inside its card, and failure
visible (colour, "n failed", "Failed" when every item failed, a cost line that says nothing
was answered). Screenshots go to test-artifacts/batch-states-*.png."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Locator, Page, expect

from playground.batches.inputs import utf8_lines
from playground.batches.models import Batch, BatchItem, BatchPath, BatchStatus, ItemState
from playground.batches.services.drafts import BatchInput, batch_draft_create
from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import catalog_seed
from playground.providers.models import ProviderConnection
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, fake_workers_connection, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_MODEL = "@cf/meta/llama-3.3-70b-instruct-fp8-fast"
REFUSED = "The provider refused this item: `temperature` must be a number from 0 to 2; got 5."


def _batch(
    actors: Actors,
    connection: ProviderConnection,
    name: str,
    states: list[ItemState],
    *,
    refused: bool = False,
) -> Batch:
    now = timezone.now()
    finished = all(state in (ItemState.DONE, ItemState.FAILED) for state in states)
    batch = Batch.objects.create(
        team=actors.team,
        created_by=actors.teammate,
        connection=connection,
        model_id=LONG_MODEL,
        name=name,
        input_kind="jsonl",
        status=BatchStatus.DONE if finished else BatchStatus.RUNNING,
        path=BatchPath.QUEUE,
        path_reason="Llama 3.3 70B fp8 fast takes Workers AI's batch queue (?queueRequest=true).",
        item_count=len(states),
        submitted_at=now - dt.timedelta(minutes=5),
        priced_on=now.date(),
        finished_at=now if finished else None,
    )
    BatchItem.objects.bulk_create(
        BatchItem(
            batch=batch,
            index=index,
            line=index + 1,
            request={"messages": [{"role": "user", "content": f"Question {index}"}]},
            state=state,
            response={"text": f"Answer {index}"} if state == ItemState.DONE else None,
            error=REFUSED if state == ItemState.FAILED else "",
            error_code="8001" if state == ItemState.FAILED else "",
            input_refused=refused and state == ItemState.FAILED,
        )
        for index, state in enumerate(states)
    )
    return batch


def _inside(cell: Locator, card: Locator) -> bool:
    box, outer = cell.bounding_box(), card.bounding_box()
    assert box is not None and outer is not None
    return outer["x"] <= box["x"] and box["x"] + box["width"] <= outer["x"] + outer["width"]


def _columns_fit(page: Page, card: Locator, table: Locator) -> None:
    headers = table.locator("thead th")
    expect(headers.first).to_be_visible()
    names = headers.all_inner_texts()
    outside = [name for name, th in zip(names, headers.all(), strict=True) if not _inside(th, card)]
    assert outside == [], f"columns outside the card: {outside}"
    scroll = table.locator("xpath=..")
    assert scroll.evaluate("el => el.scrollWidth <= el.clientWidth"), "the table scrolls sideways"


def test_the_list_and_detail_fit_1280_and_show_failure(
    live_app: LiveApp,
    actors: Actors,
    fake_upstream: FakeUpstream,
    chromium_path: str,
    artifacts: Path,
) -> None:
    catalog_seed(CatalogModel, PriceCard)
    connection = fake_workers_connection(actors.team, fake_upstream)
    good = _batch(actors, connection, "Nightly summaries of support tickets", [ItemState.DONE] * 5)
    failed = _batch(actors, connection, "Temperature typo", [ItemState.FAILED] * 5, refused=True)
    partial = _batch(actors, connection, "Partly refused", [ItemState.DONE] * 3 + [ItemState.FAILED] * 2)
    running = _batch(actors, connection, "Still going", [ItemState.DONE, *[ItemState.PENDING] * 2])
    PriceCard.objects.create(
        model=CatalogModel.objects.get(model_id=LONG_MODEL),
        team=actors.team,
        effective_from=timezone.now().date() - dt.timedelta(days=7),
        input_per_m=Decimal("0.1"),
        output_per_m=Decimal("0.2"),
        label="Alpha's negotiated rate for Llama 3.3",
    )
    long_line = {
        "messages": [{"role": "user", "content": "Summarise this ticket in one line: " + "words " * 40}],
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 64,
        "seed": 1234567,
        "stop": ["END", "STOP"],
        "presence_penalty": 0.5,
        "frequency_penalty": 0.5,
        "external_reference": "ticket-000123-a-rather-long-reference",
    }
    draft = batch_draft_create(
        user=actors.teammate,
        connection_id=connection.pk,
        model_id=LONG_MODEL,
        name="Ticket summaries (draft)",
        source=BatchInput(kind="jsonl", stream=utf8_lines(json.dumps(long_line) + "\n")),
    )
    console = Console()

    with browser_page(chromium_path, console=console, viewport={"width": 1280, "height": 800}) as page:
        log_in(page, live_app.url, then="/batches/")
        card = page.locator("section[aria-labelledby=batches-heading]")
        table = card.locator("table")
        _columns_fit(page, card, table)
        for column in ("Done", "Failed", "Cost"):
            expect(table.locator("th", has_text=column)).to_be_in_viewport()
        rows = {name: table.locator("tr", has_text=name) for name in (good.name, failed.name, partial.name)}
        expect(rows[failed.name].locator(".batch-state")).to_have_text("Failed")
        expect(rows[failed.name].locator(".batch-state")).to_have_class("batch-state tone-danger")
        expect(rows[failed.name].locator("td.batch-failed")).to_have_text("5")
        expect(rows[partial.name].locator(".batch-state")).to_have_text("Finished, 2 failed")
        expect(rows[good.name].locator(".batch-state")).to_have_text("Finished")
        expect(table.locator("tr", has_text=running.name).locator(".batch-state")).to_have_text("Running")
        red = rows[failed.name].locator("td.batch-failed").evaluate("el => getComputedStyle(el).color")
        assert red == "rgb(201, 42, 42)"  # --danger
        page.screenshot(path=artifacts / "batch-states-list-1280.png", full_page=True)

        page.goto(f"{live_app.url}/batches/{failed.pk}/")
        detail = page.locator("section.batch-detail")
        expect(page.locator("#batch-state")).to_have_text("Failed")
        expect(page.locator("#cost")).to_contain_text("no item was answered: 5 failed, so nothing was billed")
        expect(detail.locator("dt", has_text="Cost so far")).to_have_count(0)
        expect(page.get_by_role("button", name="Retry")).to_have_count(0)  # each would be refused again
        expect(page.locator("#refused-note")).to_contain_text("would fail the same way")
        expect(page.locator("#refused-note")).to_contain_text(f"(the first: “{REFUSED}”)")  # its real cause
        _columns_fit(page, detail, detail.locator(".batch-items table"))
        page.screenshot(path=artifacts / "batch-states-failed-detail-1280.png", full_page=True)

        page.goto(f"{live_app.url}/batches/{partial.pk}/")
        expect(page.locator("#batch-state")).to_have_text("Finished, 2 failed")
        expect(page.get_by_role("button", name="Retry 2 failed")).to_be_visible()  # worth a retry
        _columns_fit(page, page.locator("section.batch-detail"), page.locator(".batch-items table"))
        page.screenshot(path=artifacts / "batch-states-partial-detail-1280.png", full_page=True)

        page.goto(f"{live_app.url}/batches/{draft.pk}/")
        expect(page.locator("#price-card")).to_contain_text("Alpha's negotiated rate for Llama 3.3")
        expect(page.locator("#price-card")).to_contain_text("Alpha's override")
        _columns_fit(page, page.locator("section.batch-detail"), page.locator("#preview"))
        page.screenshot(path=artifacts / "batch-states-draft-1280.png", full_page=True)

    assert console.problems == []
