"""In a real browser: the pages run under the strict Content-Security-Policy without a
single violation (htmx swaps, the chat socket, the affinity toggle), the socket is allowed
from the page's own origin, and the affinity form works with JavaScript switched off."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from playground.chat.models import Conversation
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, fake_workers_chat, log_in, open_chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def chat(actors: Actors, fake_upstream: FakeUpstream) -> Conversation:
    return fake_workers_chat(actors, fake_upstream)


def test_the_chat_page_streams_and_toggles_under_the_csp_with_no_violation(
    live_app: LiveApp, chat: Conversation, fake_upstream: FakeUpstream, chromium_path: str
) -> None:
    console = Console()

    with browser_page(chromium_path, console=console) as page:
        log_in(page, live_app.url)
        open_chat(page, live_app.url, chat)
        box = page.get_by_label("Message")
        box.fill("Hello?")
        box.press("Enter")
        expect(page.locator(".message-assistant .usage-line:not(.usage-pending)")).to_be_visible()
        expect(page.locator(".message-assistant .bubble.markdown")).to_contain_text("fake upstream")
        page.locator("label.switch", has_text="Session affinity").click()  # an htmx POST with the CSRF header
        expect(page.locator("#affinity strong")).to_have_text("off")

    assert console.problems == []
    chat.refresh_from_db()
    assert chat.use_affinity is False


def test_the_affinity_toggle_saves_without_javascript(
    live_app: LiveApp, chat: Conversation, chromium_path: str
) -> None:
    with browser_page(chromium_path, java_script_enabled=False) as page:
        log_in(page, live_app.url)
        page.goto(f"{live_app.url}/chat/{chat.pk}/")
        page.locator("label.switch", has_text="Session affinity").click()
        page.get_by_role("button", name="Save").click()
        expect(page.locator("#affinity strong")).to_have_text("off")

    chat.refresh_from_db()
    assert chat.use_affinity is False
