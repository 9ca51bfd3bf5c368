"""In Chromium under the strict CSP: the usage dashboard draws every Plotly chart, a filter
redraws them, the cost chart switches its grouping in place, and the log and detail pages
render. Screenshots go to test-artifacts/ (look at them: a broken-looking chart is a failure)."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.utils import timezone
from playwright.sync_api import ConsoleMessage, expect, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26, catalog_seed
from playground.chat.models import Conversation
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.metering import Outcome
from playground.usage.models import UsageSource, UsageStatus
from playground.usage.services import RequestContext, usage_record_create
from tests.browser.conftest import CHROMIUM_ARGS, LiveApp
from tests.browser.helpers import log_in
from tests.conftest import Actors

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
CHARTS = 10


@pytest.fixture
def usage(actors: Actors) -> None:
    """A week of realistic requests: two models, two users, conversations that grow, some errors."""
    catalog_seed(CatalogModel, PriceCard)  # a transactional test's flush empties the catalogue
    rng = random.Random(11)
    now = timezone.now()
    conversations = [
        Conversation.objects.create(
            team=actors.team, user=actors.owner, model_id=ENGINE_MODEL_ID, title=f"Session {i}"
        )
        for i in range(6)
    ]
    for _ in range(240):
        at = now - dt.timedelta(minutes=rng.randint(5, 7 * 24 * 60 - 5))
        conversation = rng.choice(conversations)
        affinity = rng.random() < 0.6
        prompt = rng.randint(800, 9000)
        cached = int(prompt * (rng.uniform(0.6, 0.95) if affinity else rng.uniform(0, 0.3)))
        ok = rng.random() > 0.08
        outcome = Outcome(
            status=UsageStatus.OK if ok else rng.choice([UsageStatus.UPSTREAM_ERROR, UsageStatus.TIMEOUT]),
            usage=NormalizedUsage(
                prompt_tokens=prompt, completion_tokens=rng.randint(50, 900), cached_tokens=cached
            ),
            usage_source=UsageSource.PROVIDER,
            ttft_ms=int(rng.lognormvariate(5.8 if cached > prompt / 2 else 6.6, 0.4)),
            latency_ms=int(rng.lognormvariate(7.8, 0.5)),
        )
        context = RequestContext(
            team_id=actors.team.pk,
            user_id=rng.choice([actors.owner.pk, actors.teammate.pk]),
            connection_id=None,
            model_id=rng.choice([ENGINE_MODEL_ID, ENGINE_MODEL_ID, KIMI_K26]),
            conversation_id=conversation.pk,
            affinity_key=f"conv-{conversation.pk}" if affinity else "",
        )
        with mock.patch("django.utils.timezone.now", return_value=at):
            usage_record_create(context=context, outcome=outcome)


def _traces(page: Any, chart: str, expected: list[str]) -> list[str]:
    """The chart's trace names, sorted, once they equal `expected` (or whatever they are after 20 s).

    A filter or a grouping swaps the fragment: its plot is drawn a moment later, so wait for it.
    """
    script = f"""() => {{
        const plot = document.querySelector('#chart-{chart} .plot');
        return plot && plot.data ? plot.data.map(t => t.name).sort() : null;
    }}"""
    wanted = sorted(expected)
    try:
        page.wait_for_function(
            f"() => JSON.stringify(({script})()) === {json.dumps(json.dumps(wanted))}", timeout=20_000
        )
    except PlaywrightTimeoutError:
        pass  # the assertion below shows what was drawn instead
    names: list[str] = page.evaluate(script) or []
    return names


def test_the_dashboard_draws_every_chart_and_a_filter_redraws_them(
    live_app: LiveApp, usage: None, chromium_path: str, artifacts: Path
) -> None:
    problems: list[str] = []

    def watch(message: ConsoleMessage) -> None:
        if message.type == "error" or "Content Security Policy" in message.text:
            problems.append(message.text)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", watch)
            page.on("pageerror", lambda error: problems.append(str(error)))
            log_in(page, live_app.url)
            page.goto(f"{live_app.url}/usage/?range=7d")
            expect(page.locator(".plot .plot-container")).to_have_count(CHARTS, timeout=20_000)
            assert _traces(page, "cost", [ENGINE_MODEL_ID, KIMI_K26]) == sorted([ENGINE_MODEL_ID, KIMI_K26])
            page.screenshot(path=str(artifacts / "usage-dashboard.png"), full_page=True)

            page.locator("select[name=model]").select_option(KIMI_K26)
            page.get_by_role("button", name="Apply").click()
            expect(page.locator(".plot .plot-container")).to_have_count(CHARTS, timeout=20_000)
            assert _traces(page, "cost", [KIMI_K26]) == [KIMI_K26]

            page.locator("#chart-cost .segmented").get_by_text("User").click()
            expect(page.locator("#chart-cost .segmented .is-current")).to_have_text("User")
            assert _traces(page, "cost", ["owner", "teammate"]) == ["owner", "teammate"]
            page.locator("#chart-cost summary").click()  # show as table
            expect(page.locator("#chart-cost table")).to_be_visible()
            page.screenshot(path=str(artifacts / "usage-dashboard-filtered.png"), full_page=True)

            page.goto(f"{live_app.url}/usage/log/?range=7d")
            expect(page.locator(".log-table tbody tr")).to_have_count(50)
            page.screenshot(path=str(artifacts / "usage-log.png"), full_page=True)
            page.locator(".log-table tbody tr a").first.click()
            expect(page.locator("table.formula")).to_be_visible()
            page.screenshot(path=str(artifacts / "usage-detail.png"), full_page=True)
        finally:
            browser.close()

    assert problems == []
