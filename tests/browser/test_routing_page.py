"""Team -> Routing in a real browser: an invalid policy refused with each problem at its path and
the version in force kept, a valid one saved, a dry run over htmx, at 1280 and 390 px.
Screenshots: `test-artifacts/routing-*.png`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import catalog_seed
from playground.routing.models import RoutingPolicy
from playground.routing.services import routing_policy_save
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import (
    Console,
    LiveApp,
    chromium_connected,
    fake_workers_connection,
    fits_the_width,
    log_in,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
KIMI = "@cf/moonshotai/kimi-k2.5"
CHEAP = "@cf/openai/gpt-oss-20b"


def test_an_owner_is_refused_a_broken_policy_saves_a_valid_one_and_dry_runs_it(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    catalog_seed(CatalogModel, PriceCard)
    fake_workers_connection(actors.team, fake_upstream)
    first = {"rules": [{"name": "main", "targets": [{"connection": "Workers AI (fake)", "model": KIMI}]}]}
    routing_policy_save(team=actors.team, document=first, user=actors.owner, note="the first")
    console = Console()
    with sync_playwright() as playwright:
        browser = chromium_connected(playwright, chromium_path)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", console.watch)
            log_in(page, live_app.url, username="owner", then=f"/teams/{actors.team.pk}/members/")
            page.get_by_role("navigation", name="Team pages").get_by_role("link", name="Routing").click()
            expect(page.get_by_role("heading", name="Routing policy")).to_be_visible()
            expect(page.locator(".panel-head")).to_contain_text("Version 1 in force")

            broken = {
                "rules": [
                    {
                        "name": "cheap",
                        "strategy": "sometimes",
                        "targets": [{"connection": "Workers AI (fake)"}],
                    }
                ],
                "cooldown": {"failures": 0},
            }
            page.get_by_label("Policy (JSON)").fill(json.dumps(broken, indent=2))
            page.get_by_role("button", name="Save as a new version").click()
            problems = page.locator("#policy-problems")
            expect(problems).to_contain_text("Not saved: 3 problems.")
            expect(problems).to_contain_text("Version 1 stays in force.")
            for path in ("$.rules[0].strategy", "$.rules[0].targets[0]", "$.cooldown.failures"):
                expect(problems.locator(".problem-path", has_text=path)).to_have_count(1)
            expect(page.get_by_label("Policy (JSON)")).to_have_value(json.dumps(broken, indent=2))
            page.screenshot(path=artifacts / "routing-01-refused.png", full_page=True)
            fits_the_width(page)

            fixed = {
                "rules": [
                    {
                        "name": "cheap",
                        "when": {"tags_any": ["extraction"]},
                        "targets": [
                            {"connection": "Workers AI (fake)", "model": CHEAP},
                            {"connection": "Workers AI (fake)", "model": KIMI},
                        ],
                    }
                ],
                "sticky_sessions": True,
            }
            page.get_by_label("Policy (JSON)").fill(json.dumps(fixed, indent=2))
            page.get_by_label("Note").fill("extraction goes to the cheap model")
            page.get_by_role("button", name="Save as a new version").click()
            expect(page.locator(".notice-success")).to_contain_text("Version 2 is in force.")
            expect(page.locator("#routing-version-2")).to_contain_text("extraction goes to the cheap model")

            page.get_by_label("Model", exact=True).fill(KIMI)
            page.get_by_label("Tags").fill("extraction")
            page.get_by_label("Prompt tokens").fill("200000")
            page.get_by_role("button", name="Route it").click()
            result = page.locator("#dry-run-result")
            expect(result).to_contain_text("Rule cheap matches (version 2).")
            expect(result.locator("tbody tr")).to_have_count(2)
            expect(result.locator("tbody tr").first).to_contain_text(f"Workers AI (fake)/{CHEAP}")
            page.screenshot(path=artifacts / "routing-02-saved-and-dry-run.png", full_page=True)
            fits_the_width(page)

            page.set_viewport_size({"width": 390, "height": 844})
            page.reload()
            assert page.evaluate("document.documentElement.scrollWidth") <= 390
            page.screenshot(path=artifacts / "routing-03-phone.png", full_page=True)
        finally:
            browser.close()
    # The refused save answers 400, which Chromium notes; nothing else (no CSP violation).
    assert console.problems == [
        "Failed to load resource: the server responded with a status of 400 (Bad Request)"
    ]
    versions = RoutingPolicy.objects.filter(team=actors.team)
    assert [version.version for version in versions] == [2, 1]  # the broken one was never saved
