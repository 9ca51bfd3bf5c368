"""Team → Alerts in Chromium at 1280 and 390 px: an owner adds a signed webhook, sends it a test,
and reads the delivery in the log (eager Celery: the test's receiver is a real loopback server).
Screenshots go to test-artifacts/alerts-*.png (look at them: a clipped table is a failure)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, fits_the_width, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [1280, 390])
def test_an_owner_adds_a_webhook_sends_a_test_and_reads_its_delivery(
    live_app: LiveApp,
    actors: Actors,
    chromium_path: str,
    artifacts: Path,
    fake_upstream: FakeUpstream,
    width: int,
) -> None:
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": width, "height": 900}) as page:
        log_in(page, live_app.url, "owner", then=f"/teams/{actors.team.pk}/alerts/")
        page.get_by_label("Name").fill("#oncall-llm")
        page.get_by_label("Kind").select_option("webhook")
        page.get_by_label("URL", exact=True).fill(fake_upstream.url + "/hook")
        page.get_by_label("Signing secret (webhooks)").fill("a-signing-secret-of-32-characters")
        page.get_by_role("button", name="Add").click()
        expect(page.get_by_role("status")).to_contain_text("Alerts now go to #oncall-llm")

        page.get_by_role("button", name="Send test").click()
        expect(page.get_by_role("status")).to_contain_text("A test alert is on its way")
        page.reload()
        row = page.locator(".alert-deliveries tbody tr").first
        expect(row).to_contain_text("Test alert for #oncall-llm")
        expect(row).to_contain_text("Sent")
        expect(row).to_contain_text("HTTP 200")
        fits_the_width(page)
        page.screenshot(path=str(artifacts / f"alerts-{width}.png"), full_page=True)
    assert fake_upstream.requests[-1].json["kind"] == "test"
    assert "x-playground-signature" in fake_upstream.requests[-1].headers
    assert console.problems == []
