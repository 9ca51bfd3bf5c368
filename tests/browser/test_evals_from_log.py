"""In Chromium at 1280 and 390 px: a member ticks requests in the request log and adds them to a
new dataset; the page first shows what each makes (a redacted body with its placeholders, a
metadata-only record refused with its reason), then the new version holds the two that could be
items. Screenshots go to /tmp/shots_evalsui/ (look at them: a clipped table is a failure)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from playground.accounts.models import StoreMode
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.evals.models import Dataset
from playground.evals.selectors import dataset_version_items
from playground.usage.calls.context import RequestContext
from playground.usage.models import UsageRecord
from tests.support.actors import Actors
from tests.support.analytics import record_write
from tests.support.browser import Console, LiveApp, browser_page, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path("/tmp/shots_evalsui")
EMAIL = "ana.lima@example.com"


def _record(actors: Actors, store: str, question: str) -> UsageRecord:
    messages = [
        {"role": "system", "content": "You answer about orders."},
        {"role": "user", "content": question},
    ]
    context = RequestContext(
        team_id=actors.team.pk,
        user_id=actors.teammate.pk,
        connection_id=None,
        model_id=ENGINE_MODEL_ID,
        request_body={"model": ENGINE_MODEL_ID, "messages": messages},
        store=store,
    )
    return record_write(timezone.now(), context, prompt=50, cached=None, out=2, ttft=90, latency=400)


@pytest.mark.parametrize("width", [1280, 390])
def test_a_member_adds_ticked_log_requests_to_a_new_dataset(
    live_app: LiveApp, actors: Actors, chromium_path: str, width: int
) -> None:
    full = _record(actors, StoreMode.FULL, "Where is my parcel?")
    redacted = _record(actors, StoreMode.REDACTED, f"Mail me at {EMAIL} about my refund")
    metadata = _record(actors, StoreMode.METADATA, "A question nobody kept")
    SHOTS.mkdir(parents=True, exist_ok=True)
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": width, "height": 900}) as page:
        log_in(page, live_app.url)
        page.goto(f"{live_app.url}/usage/log/?team={actors.team.pk}")
        for record in (full, redacted, metadata):
            page.locator(f'input[name="record"][value="{record.request_id}"]').check()
        page.screenshot(path=str(SHOTS / f"log-ticked-{width}.png"), full_page=True)
        page.get_by_role("button", name="Add ticked requests to a dataset…").click()

        lines = page.locator("#from-log-lines tbody tr")
        expect(lines).to_have_count(3)  # in the log's order, newest first
        expect(lines.filter(has_text="Where is my parcel?")).to_contain_text("goes in as stored")
        expect(lines.filter(has_text="Mail me at <email:")).to_contain_text("goes in with its placeholders")
        expect(lines.filter(has_text="Refused")).to_contain_text(
            "Refused: The record keeps metadata only (no prompt text): nothing to add."
        )
        expect(page.locator("body")).not_to_contain_text(EMAIL)
        _no_sideways_scroll(page)
        page.screenshot(path=str(SHOTS / f"from-log-preview-{width}.png"), full_page=True)

        page.get_by_label("Add to", exact=True).select_option(label="A new dataset")
        page.get_by_label("New dataset's name").fill("Support picks")
        page.get_by_role("button", name="Add to dataset").click()
        added = page.locator("#from-log-added")
        expect(added).to_contain_text("Added 2 requests to Support picks v1")
        expect(added).to_contain_text("1 redacted (placeholders kept), 1 refused")
        expect(page.locator("#from-log-lines tbody tr")).to_have_count(1)  # only the refused one
        _no_sideways_scroll(page)
        page.screenshot(path=str(SHOTS / f"from-log-added-{width}.png"), full_page=True)

        added.get_by_role("link", name="Support picks v1").click()
        expect(page.locator("#item-table tbody tr")).to_have_count(2)
        _no_sideways_scroll(page)
        page.screenshot(path=str(SHOTS / f"from-log-dataset-{width}.png"), full_page=True)
    dataset = Dataset.objects.get(name="Support picks")
    contents = sorted(
        str((item.messages or [{}])[-1].get("content"))
        for item in dataset_version_items(dataset=dataset, version=1)
    )
    assert contents[0].startswith("Mail me at <email:") and EMAIL not in contents[0]
    assert contents[1] == "Where is my parcel?"
    assert console.problems == []


def _no_sideways_scroll(page: Page) -> None:
    """The page never scrolls sideways; its wide tables scroll inside their own box (`.table-scroll`),
    which `fits_the_width`'s panel check counts as sticking out."""
    width = page.viewport_size["width"] if page.viewport_size else 0
    assert page.evaluate("document.documentElement.scrollWidth") <= width
