"""Team pages in a real browser: invite a member, add and test a connection, set a budget
and see a chat request refused. Screenshots go to `test-artifacts/teams-*.png`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from playwright.sync_api import expect, sync_playwright

from playground.accounts.models import Membership, Role
from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import KIMI_K26, catalog_seed
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord, UsageStatus
from tests.browser.conftest import CHROMIUM_ARGS, LiveApp
from tests.browser.helpers import fake_workers_connection, log_in
from tests.conftest import Actors
from tests.fakes.upstream import FakeUpstream, json_reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_owner_invites_someone_who_joins_with_the_link(
    live_app: LiveApp, actors: Actors, chromium_path: str, artifacts: Path
) -> None:
    User.objects.create_user("newcomer", password="password-newcomer")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            owner = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
            log_in(owner, live_app.url, username="owner")
            owner.get_by_role("link", name="Team", exact=True).click()
            expect(owner.get_by_role("heading", name="Members")).to_be_visible()
            owner.get_by_label("Role", exact=True).select_option("viewer")
            owner.get_by_label("For (optional)").fill("Newcomer from finance")
            owner.get_by_role("button", name="Create invitation link").click()
            link = owner.locator("#invitation-link").input_value()
            assert re.fullmatch(rf"{live_app.url}/teams/join/[\w-]+/", link)
            owner.screenshot(path=artifacts / "teams-01-invitation-link.png", full_page=True)

            newcomer = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
            log_in(newcomer, live_app.url, username="newcomer")
            newcomer.goto(link)
            expect(newcomer.get_by_role("heading", name="Join Alpha")).to_be_visible()
            newcomer.screenshot(path=artifacts / "teams-02-join.png")
            newcomer.get_by_role("button", name="Join Alpha").click()
            expect(newcomer.get_by_text("Welcome to Alpha.")).to_be_visible()
            expect(newcomer.locator("tr", has_text="newcomer").get_by_text("Viewer")).to_be_visible()
            newcomer.screenshot(path=artifacts / "teams-03-joined.png", full_page=True)

            newcomer.goto(link)  # once only
            expect(newcomer.get_by_text("already used")).to_be_visible()
        finally:
            browser.close()
    assert Membership.objects.get(user__username="newcomer").role == Role.VIEWER


def test_an_admin_adds_a_connection_and_tests_it_against_a_loopback_upstream(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    fake_upstream.script(
        json_reply({"object": "list", "data": [{"id": "gpt-4.1-mini"}, {"id": "llama-3.3-70b"}]})
    )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            log_in(page, live_app.url, username="owner")
            page.goto(f"{live_app.url}/teams/{actors.team.pk}/connections/")
            page.get_by_label("Kind").select_option("openai-compatible")
            page.get_by_role("button", name="Continue").click()
            page.get_by_label("Name").fill("Gateway")
            page.get_by_label("Base URL").fill(fake_upstream.url + "/v1")
            page.get_by_label("API token").fill("sk-browser-token-9876")
            page.screenshot(path=artifacts / "teams-04-connection-form.png", full_page=True)
            page.get_by_role("button", name="Save connection").click()
            expect(page.get_by_text("Saved Gateway.")).to_be_visible()
            card = page.locator(".connection-card", has_text="Gateway")
            expect(card).to_contain_text("••••9876")
            card.get_by_role("button", name="Test connection").click()
            result = page.locator("#test-result")
            expect(result).to_contain_text("Connected")
            expect(result).to_contain_text("gpt-4.1-mini")
            page.screenshot(path=artifacts / "teams-05-connection-tested.png", full_page=True)
            assert "sk-browser-token-9876" not in page.content()
        finally:
            browser.close()
    assert fake_upstream.requests[0].path == "/v1/models"
    assert ProviderConnection.objects.get(name="Gateway").token_last4 == "9876"


def test_an_owner_sets_a_budget_and_a_members_request_is_refused_in_the_chat(
    live_app: LiveApp,
    actors: Actors,
    fake_upstream: FakeUpstream,
    settings: LazySettings,
    chromium_path: str,
    artifacts: Path,
) -> None:
    catalog_seed(CatalogModel, PriceCard)  # a transactional test's flush empties the catalogue
    fake_workers_connection(actors.team, fake_upstream)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            owner = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            log_in(owner, live_app.url, username="owner")
            owner.goto(f"{live_app.url}/teams/{actors.team.pk}/budgets/")
            owner.get_by_label("Monthly budget (USD)").fill("0.01")
            owner.get_by_role("button", name="Save budget").click()
            expect(owner.get_by_text("Budget saved.")).to_be_visible()
            expect(owner.locator("#budget-limit")).to_have_text("$0.01")
            owner.screenshot(path=artifacts / "teams-06-budget.png", full_page=True)

            member = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            log_in(member, live_app.url, username="teammate")
            member.get_by_label("Connection").select_option(label="Workers AI (fake) · Cloudflare Workers AI")
            # The model picker is swapped for the connection's models: choose once the swap is in.
            member.wait_for_load_state("networkidle")
            expect(member.locator(f'#id_model_id option[value="{KIMI_K26}"]')).to_have_count(1)
            member.locator("#id_model_id").select_option(KIMI_K26)
            expect(member.locator("#id_model_id")).to_have_value(KIMI_K26)
            member.get_by_role("button", name="Start conversation").click()
            member.wait_for_function("() => document.querySelector('[ws-connect]') && window.htmx")
            box = member.get_by_label("Message")
            box.fill("Summarise the quarterly report.")
            box.press("Enter")
            refusal = member.locator(".answer-error")
            expect(refusal).to_contain_text("This request could cost up to $0.02", timeout=20_000)
            expect(refusal).to_contain_text("$0.01 of the team's $0.01 budget remains this month")
            member.screenshot(path=artifacts / "teams-07-refused-in-chat.png", full_page=True)
        finally:
            browser.close()
    assert fake_upstream.requests == [], "a refused request is never sent"
    record = UsageRecord.objects.get()
    assert record.status == UsageStatus.REJECTED and record.total_cost == 0
