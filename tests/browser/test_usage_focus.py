"""In Chromium: the log's Export menu offers the FOCUS file beside the other exports; its download
adds up to the dashboard's cost, and a filter the rollups do not hold turns the item into its
reason. Screenshots: test-artifacts/usage-focus-*.png."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal
from pathlib import Path

import pytest
from django.http import QueryDict
from django.utils import timezone
from playwright.sync_api import expect

from playground.analytics.filters import filters_from_query
from playground.analytics.selectors.totals import headline
from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26, catalog_seed
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.calls.context import Attribution, RequestContext
from playground.usage.metering import Outcome
from playground.usage.models import UsageSource
from playground.usage.records import usage_record_create
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, log_in
from tests.support.clock import clock

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def three_days(actors: Actors) -> None:
    """Requests on two models over three days, some of them tagged."""
    catalog_seed(CatalogModel, PriceCard)
    now = timezone.now()
    for i in range(12):
        outcome = Outcome(
            status="ok",
            usage=NormalizedUsage(
                prompt_tokens=1000 + i * 37, completion_tokens=50 + i, cached_tokens=i * 60
            ),
            usage_source=UsageSource.PROVIDER,
            ttft_ms=300,
            latency_ms=900,
        )
        context = RequestContext(
            team_id=actors.team.pk,
            user_id=actors.owner.pk,
            connection_id=None,
            model_id=(ENGINE_MODEL_ID, KIMI_K26)[i % 2],
            attribution=Attribution(tags=("prod",) if i % 3 == 0 else ()),
        )
        with clock(now - dt.timedelta(hours=6 * i + 1)):
            usage_record_create(context=context, outcome=outcome)


def test_the_focus_file_is_in_the_logs_export_menu_and_adds_up_to_the_dashboard(
    live_app: LiveApp, three_days: None, actors: Actors, chromium_path: str, artifacts: Path
) -> None:
    console = Console()
    with browser_page(chromium_path, console=console) as page:
        log_in(page, live_app.url)
        page.goto(f"{live_app.url}/usage/log/?range=7d")
        page.locator(".export-menu summary").click()
        focus = page.get_by_role("link", name="FOCUS 1.3 (FinOps)")
        expect(focus).to_be_visible()
        page.screenshot(path=str(artifacts / "usage-focus-menu.png"))
        with page.expect_download() as download:
            focus.click()
        text = Path(download.value.path()).read_text()
        assert download.value.suggested_filename.startswith(f"focus-{actors.team.slug}-")

        page.goto(f"{live_app.url}/usage/log/?range=7d&tag=prod")
        page.locator(".export-menu summary").click()
        expect(page.locator(".export-unavailable")).to_contain_text("do not hold the tag filter")
        expect(page.get_by_role("link", name="FOCUS 1.3 (FinOps)")).to_have_count(0)
        page.screenshot(path=str(artifacts / "usage-focus-menu-unavailable.png"))
    assert console.problems == []

    rows = list(csv.DictReader(io.StringIO(text)))
    filters = filters_from_query(user=actors.teammate, query=QueryDict("range=7d"))
    assert filters is not None
    assert {row["x_TokenKind"] for row in rows} == {"input", "cached_input", "output"}
    assert len({row["ChargePeriodStart"][:10] for row in rows}) >= 3
    assert sum(Decimal(row["BilledCost"]) for row in rows) == headline(filters).totals.cost > 0
