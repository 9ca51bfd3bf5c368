"""In Chromium at 1280 and 390 px: an owner sets the team's retention on its Data page and sees
the next run and what the last run removed; a record whose text went says so. Screenshots go
to test-artifacts/retention-*.png (look at them: a clipped field or line is a failure)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from playwright.sync_api import expect

from playground.usage.models import TeamRetention, UsageRecord, UsageStatus
from playground.usage.retention import retention_run
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, fits_the_width, log_in
from tests.support.clock import clock

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
HEADING = "How long records keep their text"


@pytest.mark.parametrize("width", [1280, 390])
def test_an_owner_sets_the_retention_and_sees_what_the_last_run_removed(
    live_app: LiveApp, actors: Actors, chromium_path: str, artifacts: Path, width: int
) -> None:
    now = dt.datetime.now(dt.UTC)
    with clock(now - dt.timedelta(days=45)):
        record = UsageRecord.objects.create(
            team=actors.team, model_id="m", status=UsageStatus.OK, request_body={"messages": []}
        )
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": width, "height": 900}) as page:
        log_in(page, live_app.url, "owner")
        page.goto(f"{live_app.url}/teams/{actors.team.pk}/data/")
        panel = page.locator("section", has=page.get_by_role("heading", name=HEADING))
        expect(panel.locator("#retention-next")).to_have_text("none: nothing is set")

        panel.get_by_label("Delete whole records after (days)").fill("10")
        panel.get_by_role("button", name="Save retention").click()
        expect(page.get_by_text("Records are kept from 32")).to_be_visible()

        panel = page.locator("section", has=page.get_by_role("heading", name=HEADING))
        panel.get_by_label("Remove the text after (days)").fill("30")
        panel.get_by_label("Delete whole records after (days)").fill("")
        panel.get_by_role("button", name="Save retention").click()
        expect(page.get_by_text("Retention saved: texts are removed after 30 days")).to_be_visible()
    # The page's own database work runs in the live server; the test's, between browser sessions.
    assert TeamRetention.objects.get(pk=actors.team.pk).body_days == 30
    retention_run(team_id=actors.team.pk)

    with browser_page(chromium_path, console=console, viewport={"width": width, "height": 900}) as page:
        log_in(page, live_app.url, "owner")
        page.goto(f"{live_app.url}/teams/{actors.team.pk}/data/")
        panel = page.locator("section", has=page.get_by_role("heading", name=HEADING))
        expect(panel.locator("#retention-last")).to_contain_text("1 text removed, 0 records deleted")
        expect(panel.locator("#retention-next")).to_contain_text("UTC")
        fits_the_width(page)
        panel.screenshot(path=str(artifacts / f"retention-data-{width}.png"))

        page.goto(f"{live_app.url}/usage/log/{record.request_id}/")
        expect(page.locator("#record-body-removed")).to_contain_text("text removed by the team's retention")
        fits_the_width(page)
        page.screenshot(path=str(artifacts / f"retention-record-{width}.png"), full_page=True)
    # The one refusal asked for (10 days) is the only thing the console reports.
    assert [problem for problem in console.problems if "status of 400" not in problem] == []
