"""In Chromium at 1280 and 390 px: a redacted record's page says what it kept (its mode, what was
replaced, the body with placeholders and never the values), a metadata record's says its text
was not kept, an owner sets the team's mode and its upstream redaction on its Data page, and the
dashboard draws the values redacted by type. Screenshots go to
test-artifacts/storage-*.png (look at them: a clipped list or chip is a failure)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from playground.accounts.models import StoreMode, Team
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.providers.events import Finish, TextDelta
from playground.usage.calls.context import RequestContext
from playground.usage.metering import UsageMeter
from playground.usage.models import UsageRecord
from playground.usage.records import usage_record_create
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, fits_the_width, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
EMAIL, CARD, PHONE = "ana.lima@example.com", "4111 1111 1111 1111", "+44 20 7946 0958"
BODY = {
    "model": ENGINE_MODEL_ID,
    "messages": [
        {"role": "system", "content": f"You answer {EMAIL} about their order."},
        {"role": "user", "content": f"Charge card {CARD} and text me at {PHONE}, or mail {EMAIL}."},
    ],
}


def _record(actors: Actors, store: str) -> UsageRecord:
    meter = UsageMeter(prompt_chars=200)
    meter.observe(TextDelta("Done."))
    meter.observe(Finish("stop"))
    context = RequestContext(
        team_id=actors.team.pk,
        user_id=actors.teammate.pk,
        connection_id=None,
        model_id=ENGINE_MODEL_ID,
        request_body=BODY,
        store=store,
    )
    return usage_record_create(context=context, outcome=meter.outcome())


@pytest.mark.parametrize("width", [1280, 390])
def test_a_records_page_says_what_it_kept(
    live_app: LiveApp, actors: Actors, chromium_path: str, artifacts: Path, width: int
) -> None:
    redacted = _record(actors, StoreMode.REDACTED)
    metadata = _record(actors, StoreMode.METADATA)
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": width, "height": 900}) as page:
        log_in(page, live_app.url)
        page.goto(f"{live_app.url}/usage/log/{redacted.request_id}/")
        kept = page.locator("#record-store")
        expect(kept).to_contain_text("Redacted: sensitive values replaced")
        expect(kept.locator(".redaction-counts li")).to_have_text(
            ["2 e-mail addresses", "1 phone number", "1 card number"]
        )
        body = page.locator("#request-body")
        expect(body.get_by_role("heading")).to_have_text("Request body as sent, redacted")
        expect(body.locator(".json-block")).to_contain_text("<email:")
        for value in (EMAIL, CARD, PHONE):
            expect(page.locator("body")).not_to_contain_text(value)
        fits_the_width(page)
        page.screenshot(path=str(artifacts / f"storage-record-redacted-{width}.png"), full_page=True)

        page.goto(f"{live_app.url}/usage/log/{metadata.request_id}/")
        expect(page.locator("#record-store")).to_contain_text("Metadata only")
        expect(page.locator("#request-body")).to_contain_text("Not kept: this record keeps metadata only")
        expect(page.locator(".json-block")).to_have_count(0)  # the provider sent no usage, no body
        fits_the_width(page)
        page.screenshot(path=str(artifacts / f"storage-record-metadata-{width}.png"), full_page=True)
    assert console.problems == []


@pytest.mark.parametrize("width", [1280, 390])
def test_an_owner_sets_the_teams_mode_on_the_data_page(
    live_app: LiveApp, actors: Actors, chromium_path: str, artifacts: Path, width: int
) -> None:
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": width, "height": 900}) as page:
        log_in(page, live_app.url, "owner")
        page.goto(f"{live_app.url}/teams/{actors.team.pk}/data/")
        expect(page.get_by_role("link", name="Data")).to_have_attribute("aria-current", "page")
        expect(page.get_by_label("Full: the text as sent")).to_be_checked()
        page.get_by_label("Metadata only: no prompt or answer text").check()
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.get_by_role("status")).to_contain_text("now keep: metadata only")
        expect(page.get_by_label("Metadata only: no prompt or answer text")).to_be_checked()
        fits_the_width(page)
        page.screenshot(path=str(artifacts / f"storage-data-page-{width}.png"), full_page=True)
    assert Team.objects.get(pk=actors.team.pk).store_mode == StoreMode.METADATA
    assert console.problems == []


def test_the_dashboard_draws_redacted_values_by_type(
    live_app: LiveApp, actors: Actors, chromium_path: str, artifacts: Path
) -> None:
    _record(actors, StoreMode.REDACTED)
    _record(actors, StoreMode.REDACTED)
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": 1280, "height": 900}) as page:
        log_in(page, live_app.url)
        page.goto(f"{live_app.url}/usage/?team={actors.team.pk}&range=24h")
        panel = page.locator("#chart-redactions")
        expect(panel.get_by_role("heading")).to_have_text("Redacted values by type")
        expect(panel).to_contain_text(
            "8 values replaced by placeholders: e-mail addresses 4, phone numbers 2, card numbers 2."
        )
        expect(panel.locator(".main-svg").first).to_be_visible()  # Plotly drew it
        panel.scroll_into_view_if_needed()
        panel.screenshot(path=str(artifacts / "storage-dashboard-redactions.png"))
    assert console.problems == []


def test_an_owner_turns_upstream_redaction_on_on_the_data_page(
    live_app: LiveApp, actors: Actors, chromium_path: str, artifacts: Path
) -> None:
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": 390, "height": 900}) as page:
        log_in(page, live_app.url, "owner")
        page.goto(f"{live_app.url}/teams/{actors.team.pk}/data/")
        box = page.get_by_label("Send placeholders to the model instead of sensitive values")
        expect(box).not_to_be_checked()
        box.check()
        page.get_by_role("button", name="Save what the model receives").click()
        expect(page.get_by_role("status")).to_contain_text("with placeholders for sensitive values")
        expect(box).to_be_checked()
        fits_the_width(page)
        page.screenshot(path=str(artifacts / "storage-data-upstream-390.png"), full_page=True)
    assert Team.objects.get(pk=actors.team.pk).upstream_redaction
    assert console.problems == []
