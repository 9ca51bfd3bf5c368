"""In a real browser: the pages run under the strict Content-Security-Policy without a
single violation (htmx swaps, the chat socket, the affinity toggle), the socket is allowed
from the page's own origin, and the affinity form works with JavaScript switched off."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import ConsoleMessage, expect, sync_playwright

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import KIMI_K26, catalog_seed
from playground.chat.models import Conversation
from playground.chat.services import conversation_create
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.services import connection_save
from tests.browser.conftest import CHROMIUM_ARGS, LiveApp
from tests.conftest import Actors
from tests.fakes.upstream import FakeUpstream

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def chat(actors: Actors, fake_upstream: FakeUpstream) -> Conversation:
    catalog_seed(CatalogModel, PriceCard)  # a transactional test's flush empties the catalogue
    connection = connection_save(
        connection=ProviderConnection(
            team=actors.team,
            name="Workers AI (fake)",
            kind=ConnectionKind.WORKERS_AI,
            base_url=fake_upstream.workers_base_url,
            account_id="0" * 32,
        ),
        token="cf-browser-test",
    )
    return conversation_create(user=actors.teammate, connection_id=connection.pk, model_id=KIMI_K26)


def log_in(page: Any, base_url: str) -> None:
    page.goto(base_url + "/login/")
    page.get_by_label("Username").fill("teammate")
    page.get_by_label("Password").fill("password-teammate")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(base_url + "/chat/")


def test_the_chat_page_streams_and_toggles_under_the_csp_with_no_violation(
    live_app: LiveApp, chat: Conversation, fake_upstream: FakeUpstream, chromium_path: str
) -> None:
    problems: list[str] = []

    def watch(message: ConsoleMessage) -> None:
        if message.type == "error" or "Content Security Policy" in message.text:
            problems.append(message.text)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.on("console", watch)
            log_in(page, live_app.url)
            page.goto(f"{live_app.url}/chat/{chat.pk}/")
            page.wait_for_function("() => document.querySelector('[ws-connect]') && window.htmx")
            box = page.get_by_label("Message")
            box.fill("Hello?")
            box.press("Enter")
            expect(page.locator(".message-assistant .usage-line:not(.usage-pending)")).to_be_visible()
            expect(page.locator(".message-assistant .bubble.markdown")).to_contain_text("fake upstream")
            page.locator("label.switch", has_text="Session affinity").click()  # an htmx POST with the CSRF header
            expect(page.locator("#affinity strong")).to_have_text("off")
        finally:
            browser.close()

    assert problems == []
    chat.refresh_from_db()
    assert chat.use_affinity is False


def test_the_affinity_toggle_saves_without_javascript(
    live_app: LiveApp, chat: Conversation, chromium_path: str
) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(java_script_enabled=False)
            log_in(page, live_app.url)
            page.goto(f"{live_app.url}/chat/{chat.pk}/")
            page.locator("label.switch", has_text="Session affinity").click()
            page.get_by_role("button", name="Save").click()
            expect(page.locator("#affinity strong")).to_have_text("off")
        finally:
            browser.close()

    chat.refresh_from_db()
    assert chat.use_affinity is False
