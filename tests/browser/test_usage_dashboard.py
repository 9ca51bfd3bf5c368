"""In Chromium under the strict CSP: the usage dashboard draws every Plotly chart, a filter
redraws them, the cost chart switches its grouping in place, and the log and detail pages
render; a preset applies on click and every control lives in the URL; a burst is drawn over
its own hours; the log fits the window with its totals row. Screenshots go to test-artifacts/
(look at them: a broken-looking chart is a failure)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import ConsoleMessage, expect, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26, catalog_seed
from playground.chat.models import Conversation
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.calls.context import RequestContext
from playground.usage.metering import Outcome
from playground.usage.models import RequestPath, UsageSource, UsageStatus
from playground.usage.records import usage_record_create
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, chromium_connected, log_in
from tests.support.clock import clock

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
# Every plot the `usage` rows draw: the charts of `views.CHARTS` that need no key or preset
# filter (11, cache breaks included) and the cache hit ratio by session. It must be the whole
# count: a lower figure can match while the last plots are still loading.
CHARTS = 12


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
        # None within an hour or two of the 24 h and 7 d windows' starts: those start on a whole
        # hour, so a test crossing one (CI at 20:00) would see the figures change under it.
        minutes = min(rng.randint(5, 7 * 24 * 60 - 5), 7 * 24 * 60 - 180)
        if 23 * 60 <= minutes <= 26 * 60:
            minutes += 4 * 60
        at = now - dt.timedelta(minutes=minutes)
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
        with clock(at):
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
    with contextlib.suppress(PlaywrightTimeoutError):  # the assertion below shows what was drawn instead
        page.wait_for_function(
            f"() => JSON.stringify(({script})()) === {json.dumps(json.dumps(wanted))}", timeout=20_000
        )
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
        browser = chromium_connected(playwright, chromium_path)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", watch)
            page.on("pageerror", lambda error: problems.append(str(error)))
            log_in(page, live_app.url)
            page.goto(f"{live_app.url}/usage/?range=7d")
            expect(page.locator(".plot .plot-container")).to_have_count(CHARTS, timeout=20_000)
            assert _traces(page, "cost", [ENGINE_MODEL_ID, KIMI_K26]) == sorted([ENGINE_MODEL_ID, KIMI_K26])
            page.screenshot(path=str(artifacts / "usage-dashboard.png"), full_page=True)

            page.locator("select[name=model]").select_option(KIMI_K26)  # applied at once
            expect(page).to_have_url(re.compile(r"range=7d&model="))
            expect(page.locator(".plot .plot-container")).to_have_count(CHARTS, timeout=20_000)
            assert _traces(page, "cost", [KIMI_K26]) == [KIMI_K26]

            page.locator("#chart-cost .segmented").get_by_text("User").click()
            expect(page.locator("#chart-cost .segmented .is-current")).to_have_text("User")
            assert _traces(page, "cost", ["owner", "teammate"]) == ["owner", "teammate"]
            page.locator("#chart-cost summary").click()  # show as table
            expect(page.locator("#chart-cost table")).to_be_visible()
            page.screenshot(path=str(artifacts / "usage-dashboard-filtered.png"), full_page=True)

            page.goto(f"{live_app.url}/usage/log/?range=7d")
            expect(page.locator(".log-table tbody:not(.log-totals) tr")).to_have_count(50)
            page.screenshot(path=str(artifacts / "usage-log.png"), full_page=True)
            page.locator(".log-table tbody tr a").first.click()
            expect(page.locator("table.formula")).to_be_visible()
            page.screenshot(path=str(artifacts / "usage-detail.png"), full_page=True)
        finally:
            browser.close()

    assert problems == []


def _plot_x(page: Any, chart: str) -> list[str]:
    """The x values (bucket starts) the chart drew."""
    found = f"document.querySelector('#chart-{chart} .plot')"
    return page.evaluate(f"() => {{ const p = {found}; return p && p.data ? p.data[0].x : []; }}")


def test_a_preset_click_redraws_the_dashboard_and_the_url_keeps_every_choice(
    live_app: LiveApp, usage: None, chromium_path: str, artifacts: Path
) -> None:
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": 1280, "height": 900}) as page:
        page.on("pageerror", lambda error: console.problems.append(str(error)))
        log_in(page, live_app.url)
        page.goto(f"{live_app.url}/usage/?range=7d")
        expect(page.locator(".plot .plot-container")).to_have_count(CHARTS, timeout=20_000)
        week = _plot_x(page, "cost")
        assert len(week) in (168, 169)  # a week of hourly buckets: the requests fill it
        expect(page.locator("#headline .stat")).to_have_count(7)

        page.locator("label.preset", has_text="24h").click()  # no Apply

        expect(page).to_have_url(re.compile(r"/usage/\?(team=\d+&)?range=24h$"))
        expect(page.locator("#range-24h")).to_be_checked()
        page.wait_for_function(
            "() => { const p = document.querySelector('#chart-cost .plot');"
            " return p && p.data && p.data[0].x.length <= 25; }",
            timeout=20_000,
        )
        expect(page.locator(".plot .plot-container")).to_have_count(CHARTS, timeout=20_000)
        day = _plot_x(page, "cost")
        assert day == week[-len(day) :]  # the last day's hours, redrawn
        day_start = (timezone.now() - dt.timedelta(hours=24)).strftime("%Y-%m-%d %H:00")
        expect(page.locator(".analytics-period")).to_contain_text(day_start)
        headline_requests = page.locator('#headline [data-stat="requests"] .stat-value').inner_text()
        page.screenshot(path=str(artifacts / "usage-dashboard-24h.png"), full_page=True)

        page.locator("#chart-cost .segmented").get_by_text("User").click()
        expect(page).to_have_url(re.compile(r"range=24h&group=user$"))
        assert _traces(page, "cost", ["owner", "teammate"]) == ["owner", "teammate"]
        page.locator("#chart-what-if select").select_option("nocache")
        expect(page).to_have_url(re.compile(r"range=24h&group=user&card=nocache$"))
        page.locator("select[name=model]").select_option(KIMI_K26)  # a filter keeps both choices
        expect(page).to_have_url(re.compile(r"range=24h&model=.*&group=user&card=nocache$"))
        expect(page.locator("#chart-cost .segmented .is-current")).to_have_text("User", timeout=20_000)

        page.reload()  # the address alone brings every control back
        expect(page.locator("#range-24h")).to_be_checked()
        expect(page.locator("select[name=model]")).to_have_value(KIMI_K26)
        expect(page.locator("#chart-cost .segmented .is-current")).to_have_text("User", timeout=20_000)
        expect(page.locator("#chart-what-if select")).to_have_value("nocache")

        page.evaluate("() => history.go(-3)")  # back to the 24 h view before any choice, drawn again
        expect(page).to_have_url(re.compile(r"range=24h$"))
        expect(page.locator(".plot .plot-container")).to_have_count(CHARTS, timeout=20_000)
        expect(page.locator("#chart-cost .segmented .is-current")).to_have_text("Model", timeout=20_000)
        expect(page.locator('#headline [data-stat="requests"] .stat-value')).to_have_text(headline_requests)
        page.evaluate("() => history.back()")  # and one more step, to the week
        expect(page).to_have_url(re.compile(r"range=7d$"))
        expect(page.locator("#range-7d")).to_be_checked()
        expect(page.locator(".plot .plot-container")).to_have_count(CHARTS, timeout=20_000)
    assert console.problems == []


@pytest.fixture
def burst(actors: Actors) -> None:
    """One afternoon of requests, nothing else in the week (a new team's first day)."""
    catalog_seed(CatalogModel, PriceCard)
    rng = random.Random(3)
    now = timezone.now()
    for _ in range(60):
        at = now - dt.timedelta(minutes=rng.randint(1, 5 * 60))
        outcome = Outcome(
            status=UsageStatus.OK,
            usage=NormalizedUsage(
                prompt_tokens=rng.randint(500, 4000), completion_tokens=200, cached_tokens=300
            ),
            usage_source=UsageSource.PROVIDER,
            ttft_ms=rng.randint(80, 900),
            latency_ms=rng.randint(900, 4000),
        )
        context = RequestContext(
            team_id=actors.team.pk, user_id=actors.teammate.pk, connection_id=None, model_id=ENGINE_MODEL_ID
        )
        with clock(at):
            usage_record_create(context=context, outcome=outcome)


def test_a_burst_in_the_default_week_is_drawn_over_its_own_hours(
    live_app: LiveApp, burst: None, chromium_path: str, artifacts: Path
) -> None:
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": 1280, "height": 900}) as page:
        log_in(page, live_app.url)
        page.goto(f"{live_app.url}/usage/")
        expect(page.locator(".plot .plot-container")).to_have_count(
            CHARTS - 4, timeout=20_000
        )  # no session: the two conversation charts, the cache breaks and the hit ratio are empty
        assert len(_plot_x(page, "cost")) == 12
        expect(page.locator("#chart-span")).to_contain_text("every request of the period is in that span")
        expect(page.locator('#headline [data-stat="requests"] .stat-value')).to_have_text("60")
        page.screenshot(path=str(artifacts / "usage-dashboard-burst.png"), full_page=True)
    assert console.problems == []


@pytest.fixture
def wide_log(actors: Actors) -> None:
    """Records with the longest cells a log shows: long model ids, user names, batch sources, costs."""
    catalog_seed(CatalogModel, PriceCard)
    long_user = User.objects.create_user("finops.reviewer-with-a-long-name", password="x")
    now = timezone.now()
    for i in range(30):
        context = RequestContext(
            team_id=actors.team.pk,
            user_id=long_user.pk if i % 2 else actors.teammate.pk,
            connection_id=None,
            model_id=["@cf/meta/llama-4-scout-17b-16e-instruct", KIMI_K26, "@cf/openai/gpt-oss-120b"][i % 3],
            path=RequestPath.BATCH if i % 2 else RequestPath.CHAT,
            source=f"batch-item:{123456 + i}:2" if i % 2 else "",
            affinity_key="session-1" if i % 3 else "",
        )
        outcome = Outcome(
            status=[UsageStatus.OK, UsageStatus.CLIENT_DISCONNECTED, UsageStatus.UPSTREAM_ERROR][i % 3],
            usage=NormalizedUsage(prompt_tokens=123_456 + i, completion_tokens=12_345, cached_tokens=100_000),
            usage_source=UsageSource.PROVIDER,
            ttft_ms=12_345,
            latency_ms=123_456,
        )
        with clock(now - dt.timedelta(minutes=i)):
            usage_record_create(context=context, outcome=outcome)


@pytest.mark.parametrize("width", [1280, 1366])
def test_the_log_fits_the_window_and_totals_every_page(
    live_app: LiveApp, wide_log: None, actors: Actors, chromium_path: str, artifacts: Path, width: int
) -> None:
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": width, "height": 800}) as page:
        log_in(page, live_app.url)
        page.goto(f"{live_app.url}/usage/log/?range=24h")
        expect(page.locator("#log-totals")).to_contain_text("All 30 requests of these filters")
        fit = page.evaluate(
            """() => {
                const scroll = document.querySelector('.log-panel .table-scroll');
                const last = document.querySelector('.log-table thead th:last-child').getBoundingClientRect();
                return {overflow: scroll.scrollWidth - scroll.clientWidth, right: last.right,
                        box: scroll.getBoundingClientRect().right,
                        page: document.documentElement.scrollWidth};
            }"""
        )
        page.screenshot(path=str(artifacts / f"usage-log-{width}.png"))
        assert fit["overflow"] <= 0 and fit["right"] <= fit["box"] <= width, fit
        assert fit["page"] <= width, fit

        page.locator("select[name=status]").select_option("ok")  # a filter applies at once, totals too
        expect(page).to_have_url(re.compile(r"range=24h&status=ok&sort=newest$"))
        expect(page.locator("#log-totals")).to_contain_text("All 10 requests of these filters")
    assert console.problems == []
