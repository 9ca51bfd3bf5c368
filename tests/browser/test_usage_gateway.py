"""In Chromium at 1280 px: the usage pages with a week of gateway traffic beside the chat's. The
dashboard ranks cost by API key and by end user, a key filter redraws the rankings and says
which charts it cannot narrow, the log names each gateway row's key and end user and narrows to
them on a click, and the record page shows what the request said about itself. Screenshots go
to test-artifacts/usage-gateway-*.png (look at them: a clipped column or a broken chart is a
failure)."""

from __future__ import annotations

import datetime as dt
import random
import re
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26, catalog_seed
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.api_keys import api_key_issue
from playground.usage.calls.context import Attribution, RequestContext
from playground.usage.metering import Outcome
from playground.usage.models import ApiKey, RequestPath, UsageSource, UsageStatus
from playground.usage.records import usage_record_create
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, log_in
from tests.support.clock import clock

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
WIDTH = 1280
KEYS = ("checkout-service", "support-agent-with-a-longer-name", "nightly-evals")
END_USERS = 30  # more than the rankings' top 8: the rest is one "other" bar


@pytest.fixture
def gateway_week(actors: Actors) -> list[ApiKey]:
    """A week of chat requests and of gateway requests from three keys and thirty end users (a
    few heavy ones), with sessions, tags, metadata and trace ids."""
    catalog_seed(CatalogModel, PriceCard)
    rng = random.Random(24)
    now = timezone.now()
    keys = [
        api_key_issue(team_id=actors.team.pk, name=name, connection_id=None, created_by_id=actors.owner.pk)[0]
        for name in KEYS
    ]
    end_users = [f"user_{rng.getrandbits(64):016x}@customer-{n}.example" for n in range(END_USERS)]
    for i in range(300):
        gateway = i % 3 != 0
        key = rng.choices(keys, [6, 3, 1])[0]
        end_user = rng.choices(end_users, [1 / (n + 1) for n in range(END_USERS)])[0]
        attribution = Attribution(
            api_key_id=key.pk,
            end_user=end_user if rng.random() < 0.9 else "",
            session=f"sess-{rng.randint(1, 40)}",
            tags=tuple(rng.sample(["prod", "eu", "checkout", "retry", "beta"], rng.randint(0, 3))),
            metadata={"order_id": rng.randint(1000, 9999), "region": rng.choice(["eu-west", "us-east"])},
            trace_id=f"{rng.getrandbits(128):032x}",
        )
        prompt = rng.randint(500, 9000)
        outcome = Outcome(
            status=UsageStatus.OK if rng.random() > 0.05 else UsageStatus.UPSTREAM_ERROR,
            usage=NormalizedUsage(
                prompt_tokens=prompt,
                completion_tokens=rng.randint(40, 900),
                cached_tokens=int(prompt * rng.uniform(0, 0.9)),
            ),
            usage_source=UsageSource.PROVIDER,
            ttft_ms=int(rng.lognormvariate(6, 0.4)),
            latency_ms=int(rng.lognormvariate(7.8, 0.5)),
        )
        context = RequestContext(
            team_id=actors.team.pk,
            user_id=actors.owner.pk if gateway else actors.teammate.pk,
            connection_id=None,
            model_id=rng.choice([ENGINE_MODEL_ID, KIMI_K26]),
            path=RequestPath.GATEWAY if gateway else RequestPath.CHAT,
            affinity_key=f"aff-{rng.randint(1, 9)}" if gateway and rng.random() < 0.5 else "",
            attribution=attribution if gateway else Attribution(),
        )
        with clock(now - dt.timedelta(minutes=rng.randint(5, 7 * 24 * 60 - 5))):
            usage_record_create(context=context, outcome=outcome)
    return keys


def _bars(page: Page, chart: str) -> list[str]:
    """The bar labels a ranking drew, top first, once drawn."""
    page.wait_for_function(
        f"() => {{ const p = document.querySelector('#chart-{chart} .plot'); return p && p.layout; }}",
        timeout=20_000,
    )
    ticks: list[str] = page.evaluate(
        f"() => document.querySelector('#chart-{chart} .plot').layout.yaxis.ticktext.slice().reverse()"
    )
    return ticks


def _fits(page: Page, scroller: str = "") -> dict[str, Any]:
    """How wide the page is, and how far a scrolling box (if any) overflows."""
    fit: dict[str, Any] = page.evaluate(
        """(scroller) => {
            const box = scroller && document.querySelector(scroller);
            return {page: document.documentElement.scrollWidth,
                    overflow: box ? box.scrollWidth - box.clientWidth : 0};
        }""",
        scroller,
    )
    return fit


def test_the_dashboard_ranks_keys_and_end_users_and_a_key_filter_narrows_them(
    live_app: LiveApp, gateway_week: list[ApiKey], chromium_path: str, artifacts: Path
) -> None:
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": WIDTH, "height": 900}) as page:
        page.on("pageerror", lambda error: console.problems.append(str(error)))
        log_in(page, live_app.url)
        page.goto(f"{live_app.url}/usage/?range=7d")
        # every chart but the two of conversations, which these requests have none of
        expect(page.locator(".plot .plot-container")).to_have_count(12, timeout=20_000)
        assert _bars(page, "cost-by-key") == list(KEYS)
        by_user = _bars(page, "cost-by-end-user")
        assert len(by_user) == 9 and re.fullmatch(r"\d+ other end users", by_user[-1]), by_user
        page.screenshot(path=str(artifacts / "usage-gateway-dashboard.png"), full_page=True)
        assert _fits(page)["page"] <= WIDTH

        page.locator("select[name=key]").select_option(label="nightly-evals")  # applied at once
        expect(page).to_have_url(re.compile(rf"range=7d&key={gateway_week[2].pk}$"))
        expect(page.locator("#headline .stat")).to_have_count(4, timeout=20_000)
        expect(page.locator("#headline")).to_contain_text("Filtered by API key or end user")
        # the eleven time charts from the full-key rollups (cache breaks included), and the
        # prompt versions' (presets)
        expect(page.locator(".chart-unavailable")).to_have_count(12, timeout=20_000)
        # the rankings by key and end user, and the hit ratio by session (read from the records)
        expect(page.locator(".plot .plot-container")).to_have_count(3, timeout=20_000)
        assert _bars(page, "cost-by-key") == ["nightly-evals"]
        page.evaluate("() => window.scrollTo(0, 0)")  # the sticky top bar, at the top of a full page
        page.screenshot(path=str(artifacts / "usage-gateway-dashboard-key.png"), full_page=True)
        assert _fits(page)["page"] <= WIDTH
    assert console.problems == []


def test_the_log_names_keys_and_end_users_narrows_to_them_and_fits_1280(
    live_app: LiveApp, gateway_week: list[ApiKey], chromium_path: str, artifacts: Path
) -> None:
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": WIDTH, "height": 900}) as page:
        log_in(page, live_app.url)
        page.goto(f"{live_app.url}/usage/log/?range=7d&path=gateway")
        expect(page.locator("#log-totals")).to_contain_text("requests of these filters")
        expect(page.locator(".log-table .log-key").first).to_be_visible()
        page.screenshot(path=str(artifacts / "usage-gateway-log.png"))
        fit = _fits(page, ".log-panel .table-scroll")
        assert fit["overflow"] <= 0 and fit["page"] <= WIDTH, fit

        end_user = page.locator(".log-table .log-end-user").first
        name = end_user.get_attribute("title") or ""
        end_user.click()  # narrows the log to that end user, from the first page
        expect(page).to_have_url(re.compile(r"range=7d&path=gateway&end_user=user_"))
        expect(page.locator("#filter-end-user")).to_have_value(name.removeprefix("End user ").split(":")[0])
        expect(page.locator("#log-totals")).to_contain_text("of these filters")

        page.locator("#filter-tag").fill("prod")
        page.locator("#filter-tag").press("Enter")
        expect(page).to_have_url(re.compile(r"&tag=prod"))
        expect(page.locator("#log-totals")).to_contain_text("of these filters")
        page.screenshot(path=str(artifacts / "usage-gateway-log-filtered.png"))

        page.locator(".log-table tbody:not(.log-totals) tr a").first.click()
        expect(page.locator("#attribution")).to_contain_text("Sent through the gateway")
        expect(page.locator("#attribution .json-block")).to_contain_text('"order_id"')
        page.screenshot(path=str(artifacts / "usage-gateway-detail.png"), full_page=True)
        assert _fits(page)["page"] <= WIDTH
    assert console.problems == []
