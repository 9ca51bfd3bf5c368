"""A batch in a real browser on the real engine: paste a 20-line JSONL, confirm, watch the
progress reach 100 % (htmx polling), download the results and check them.

The Celery worker runs in a thread of this process (`celery_worker_thread`, tests/browser/conftest.py) on
the in-memory broker, so it shares the test's in-memory database; the queue path talks to
the real engine process over HTTP. Screenshots go to test-artifacts/batches-*.png.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import LazySettings
from playwright.sync_api import expect

from playground.batches.models import Batch
from playground.usage.models import UsageRecord
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, engine_connection, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ITEMS = 20


def test_a_member_submits_a_jsonl_batch_watches_it_finish_and_downloads_the_results(
    live_app: LiveApp,
    running_engine: Any,
    actors: Actors,
    settings: LazySettings,
    chromium_path: str,
    artifacts: Path,
    celery_worker_thread: None,
) -> None:
    settings.BATCH_POLL_FIRST_SECONDS = 0.5
    settings.BATCH_POLL_MAX_SECONDS = 2.0
    engine_connection(actors, settings, running_engine)
    lines = "\n".join(
        json.dumps(
            {
                "messages": [{"role": "user", "content": f"Say the number {i}."}],
                "max_tokens": 6,
                "external_reference": f"row-{i}",
            }
        )
        for i in range(ITEMS)
    )
    shots = Path("/tmp/shots/batches")
    shots.mkdir(parents=True, exist_ok=True)

    console = Console()

    with browser_page(chromium_path, console=console) as page:
        log_in(page, live_app.url, then="/batches/")
        expect(page.get_by_text("No batches yet")).to_be_visible()

        # A bad line first: refused with its number, nothing stored.
        page.get_by_label("Model").fill(running_engine.model_id)
        page.get_by_label("Paste").fill(lines + "\n{not json")
        page.get_by_role("button", name="Check and preview").click()
        expect(page.locator("#line-errors")).to_contain_text(f"Line {ITEMS + 1}: not valid JSON")
        page.screenshot(path=shots / "01-line-error.png", full_page=True)
        expect(page.locator("#line-errors")).to_contain_text("nothing was queued")

        page.get_by_label("Model").fill(running_engine.model_id)
        page.get_by_label("Paste").fill(lines)
        page.get_by_role("button", name="Check and preview").click()
        expect(page.locator("#preview")).to_contain_text("row-0")
        expect(page.locator("#batch-path")).to_contain_text("Provider queue")
        expect(page.locator("#estimate")).to_contain_text("Priced as Kimi K2.5")
        page.screenshot(path=shots / "02-preview.png", full_page=True)

        page.get_by_role("button", name=f"Confirm and run {ITEMS} items").click()
        expect(page.locator("#progress")).to_be_visible()
        page.screenshot(path=shots / "03-running.png", full_page=True)
        expect(page.locator("#percent")).to_have_text("100 %", timeout=180_000)
        expect(page.locator("#download-jsonl")).to_be_visible()
        # Once finished, the page loads again whole: item states, no Cancel button.
        expect(page.get_by_role("button", name="Cancel pending items")).to_have_count(0, timeout=10_000)
        expect(page.locator("td", has_text="Done").first).to_be_visible()
        page.screenshot(path=shots / "04-finished.png", full_page=True)

        with page.expect_download() as download_info:
            page.locator("#download-jsonl").click()
        jsonl_text = Path(download_info.value.path()).read_text()
        with page.expect_download() as csv_info:
            page.locator("#download-csv").click()
        csv_text = Path(csv_info.value.path()).read_text()
        page.get_by_role("link", name="0", exact=True).click()
        expect(page.get_by_text("batch-item:")).to_be_visible()
        page.screenshot(path=shots / "05-item.png", full_page=True)

    rows = [json.loads(line) for line in jsonl_text.splitlines()]
    assert [row["index"] for row in rows] == list(range(ITEMS))
    assert [row["external_reference"] for row in rows] == [f"row-{i}" for i in range(ITEMS)]
    assert all(row["state"] == "done" and row["error"] is None for row in rows)
    assert all(row["usage"]["completion_tokens"] > 0 for row in rows)
    assert all(row["output"]["text"] for row in rows)
    assert Batch.objects.count() == 1  # the refused input stored nothing
    assert len(csv_text.splitlines()) >= ITEMS + 1
    assert UsageRecord.objects.filter(path="batch").count() == ITEMS
    assert set(UsageRecord.objects.values_list("source", flat=True)) == {
        f"batch-item:{pk}:1" for pk in Batch.objects.get().items.values_list("pk", flat=True)
    }
    assert not [problem for problem in console.problems if "Content Security Policy" in problem], (
        console.problems
    )
    httpx.get(running_engine.url + "/healthz", headers=running_engine.headers)  # the engine is still up
