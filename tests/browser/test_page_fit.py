"""Crowded pages that still fit, in Chromium at a laptop's 1280 px and a phone's 390 px (issue 36,
point 5), with a busy team's data (`tests/support/crowded.py`): long model ids, long connection,
preset, key and conversation names, many rows.

- Every action on a preset version is visible, inside the screen, on top and clickable.
- No table of the Usage dashboard is clipped at 1280 px: no card scrolls sideways and no table is
  wider than its card. On a phone a wide table may scroll inside its own box, which says so.
- The API keys page and the new key's page fit a phone: no sideways page scroll, the actions in
  reach, the snippet wrapped inside its box.

Screenshots go to `test-artifacts/fit-*.png`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, ViewportSize, expect

from playground.providers.models import ProviderConnection
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, fits_the_width, log_in
from tests.support.connections import workers_connection_for
from tests.support.crowded import LONG_CONNECTION, crowded_keys, crowded_presets, crowded_usage

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LAPTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
VIEWPORTS = pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1280", "390"])


def long_named_connection(actors: Actors, upstream: FakeUpstream) -> ProviderConnection:
    return workers_connection_for(actors.team, upstream, name=LONG_CONNECTION, token="cf-fit-test")


def shot(page: Page, path: Path) -> None:
    """The whole page from its top (the sticky top bar where it belongs)."""
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=path, full_page=True)


IN_REACH = """(el) => {
    const first = el.getBoundingClientRect();
    window.scrollBy({top: first.top + first.height / 2 - innerHeight / 2, behavior: 'instant'});
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height) return 'not drawn';
    if (r.left < 0 || r.right > document.documentElement.clientWidth)
        return `off screen (${Math.round(r.left)} to ${Math.round(r.right)} px)`;
    for (let box = el.parentElement; box && box !== document.body; box = box.parentElement) {
        const style = getComputedStyle(box);
        if (style.overflowX === 'visible' && style.overflowY === 'visible') continue;
        const b = box.getBoundingClientRect();
        if (r.left < b.left - 1 || r.right > b.right + 1 || r.top < b.top - 1 || r.bottom > b.bottom + 1)
            return `hidden in a box that must be scrolled (${box.className})`;
    }
    const line = el.getClientRects()[0];  // a link wrapped on two lines: the middle of its first
    const hit = document.elementFromPoint(line.x + line.width / 2, line.y + line.height / 2);
    return el === hit || el.contains(hit) ? '' : 'covered';
}"""


def reachable(control: Locator) -> None:
    """Once the page (not a box inside it) is scrolled to it: drawn wholly inside the screen and
    every box around it, nothing over its centre, and a click would land on it (Playwright's
    trial click runs the actionability checks)."""
    problem = control.evaluate(IN_REACH)
    assert problem == "", f"{control}: {problem}"
    control.click(trial=True, timeout=5_000)


@VIEWPORTS
def test_every_action_on_a_preset_version_is_in_reach(
    live_app: LiveApp,
    actors: Actors,
    fake_upstream: FakeUpstream,
    chromium_path: str,
    artifacts: Path,
    viewport: ViewportSize,
) -> None:
    preset = crowded_presets(actors, long_named_connection(actors, fake_upstream))
    console = Console()
    with browser_page(chromium_path, console=console, viewport=viewport) as page:
        log_in(page, live_app.url, then="/presets/")
        fits_the_width(page)
        reachable(page.get_by_role("link", name=preset.name))
        shot(page, artifacts / f"fit-presets-list-{viewport['width']}.png")

        page.get_by_role("link", name=preset.name).click()
        expect(page.get_by_role("heading", name=preset.name)).to_be_visible()
        fits_the_width(page)
        actions = page.locator(".version-actions").locator("a, button")
        # Six versions: Start conversation, Compare, Configure a batch, Export, Requests, and a
        # Diff on all but the newest.
        expect(actions).to_have_count(6 * 5 + 5)
        for index in range(actions.count()):
            reachable(actions.nth(index))
        reachable(page.locator("#diff-newest"))
        reachable(page.get_by_role("button", name="Save as a new version"))
        shot(page, artifacts / f"fit-preset-detail-{viewport['width']}.png")

        version = page.locator("#version-3")
        version.get_by_role("link", name="Diff with v6").click()
        expect(page.get_by_role("heading", name=f"{preset.name}: v3 → v6")).to_be_visible()
        fits_the_width(page)
        reachable(page.get_by_role("button", name="Show"))
        reachable(page.get_by_role("link", name="Back to the preset"))
        expect(page.locator("#diff-model")).to_be_visible()
        assert page.locator("#diff-system_prompt").evaluate("el => el.scrollWidth <= el.clientWidth + 1")
        shot(page, artifacts / f"fit-preset-diff-{viewport['width']}.png")
    assert console.problems == []


CLIPPED = """(phone) => {
    const problems = [];
    const outside = (box, edge) => box.left < edge.left - 1 || box.right > edge.right + 1;
    for (const card of document.querySelectorAll('.analytics-layout .panel, .headline')) {
        const name = card.id || card.className;
        const edge = card.getBoundingClientRect();
        if (card.scrollWidth > card.clientWidth + 1)
            problems.push(`${name}: the card scrolls sideways (${card.scrollWidth} > ${card.clientWidth})`);
        for (const table of card.querySelectorAll('table')) {
            const scroller = table.closest('.table-scroll');
            if (scroller && scroller.scrollWidth > scroller.clientWidth + 1) {
                const style = getComputedStyle(scroller);
                if (!phone)
                    problems.push(`${name}: a table scrolls in its box (${scroller.scrollWidth} px)`);
                else if (style.overflowX !== 'auto' || !style.backgroundImage.includes('gradient'))
                    problems.push(`${name}: a table scrolls in a box that does not show it`);
                if (outside(scroller.getBoundingClientRect(), edge))
                    problems.push(`${name}: a table's box is wider than its card`);
            } else if (outside(table.getBoundingClientRect(), edge)) {
                const width = Math.round(table.getBoundingClientRect().width);
                problems.push(`${name}: a table ${width} px wide in ${Math.round(edge.width)} px`);
            }
        }
    }
    return problems;
}"""


def dashboard_loaded(page: Page) -> None:
    """Every card swapped in, and every "Show as table" opened."""
    expect(page.locator(".analytics-layout .chart-loading")).to_have_count(0, timeout=30_000)
    for summary in page.locator("details.chart-table > summary").all():
        summary.click()


@VIEWPORTS
def test_no_table_of_the_dashboard_is_clipped(
    live_app: LiveApp,
    actors: Actors,
    fake_upstream: FakeUpstream,
    chromium_path: str,
    artifacts: Path,
    viewport: ViewportSize,
) -> None:
    crowded_usage(actors, long_named_connection(actors, fake_upstream))
    console = Console()
    with browser_page(chromium_path, console=console, viewport=viewport) as page:
        log_in(page, live_app.url, username="owner", then="/usage/?range=7d")
        dashboard_loaded(page)
        for card in ("#hit-ratio-sessions", "#runway table", ".conformance-table", "#ttft-by-tag"):
            expect(page.locator(card)).to_be_visible()
        shot(page, artifacts / f"fit-dashboard-{viewport['width']}.png")
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        # On a phone a table may scroll in its own box, whose shadows say there is more.
        assert page.evaluate(CLIPPED, viewport == PHONE) == []
    assert console.problems == []


@VIEWPORTS
def test_the_api_keys_pages_fit_the_screen(
    live_app: LiveApp,
    actors: Actors,
    fake_upstream: FakeUpstream,
    chromium_path: str,
    artifacts: Path,
    viewport: ViewportSize,
) -> None:
    connection = long_named_connection(actors, fake_upstream)
    crowded_keys(actors, connection)
    console = Console()
    with browser_page(chromium_path, console=console, viewport=viewport) as page:
        log_in(page, live_app.url, username="owner", then=f"/teams/{actors.team.pk}/api-keys/")
        fits_the_width(page)
        for control in page.locator(".key-table a, .key-table button").all():
            reachable(control)
        reachable(page.get_by_role("link", name="New API key"))
        shot(page, artifacts / f"fit-keys-{viewport['width']}.png")

        page.get_by_role("link", name="New API key").click()
        fits_the_width(page)
        page.get_by_label("Name").fill("nordic-enterprise-support-escalations-new")
        page.get_by_label("Connection").select_option(label=f"{LONG_CONNECTION} (Cloudflare Workers AI)")
        shot(page, artifacts / f"fit-keys-form-{viewport['width']}.png")
        page.get_by_role("button", name="Create key").click()

        snippet = page.locator("#new-key-snippet")
        expect(snippet).to_contain_text("curl -sS")
        fits_the_width(page)
        for name in ("Copy key", "Copy snippet"):
            reachable(page.get_by_role("button", name=name))
        # The snippet wraps inside its box: the whole command shows, and the box fits the screen.
        assert snippet.evaluate("el => el.scrollWidth <= el.clientWidth + 1")
        box = snippet.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
        shot(page, artifacts / f"fit-keys-new-{viewport['width']}.png")
    assert console.problems == []
