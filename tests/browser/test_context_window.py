"""An over-long message in a real browser, against the real engine (issues 36 and 38): the
pre-flight counts the draft with the engine's tokenizer and says, before Send, that it cannot fit
the 2,048-token window the engine serves (the catalogue says 8,192, and characters ÷ 4 would have
said it fits); Send is then refused with the reason and nothing is sent. Settings name the window
as served. Screenshots at 1280x800 and 390x844 go to `test-artifacts/`."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import ViewportSize, expect

from playground.catalog.seed import ENGINE_MODEL_ID
from playground.chat.models import Message
from playground.chat.services.conversations import conversation_create
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord
from tests.support.actors import Actors
from tests.support.browser import (
    Console,
    LiveApp,
    browser_page,
    drawer_open,
    log_in,
    open_chat,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
TOO_LONG = "lorem " * 1300  # 2,600 tokens for SmolLM2 (two a word); 1,950 by the characters ÷ 4 estimate
TIMEOUT_MS = 30_000


def test_an_over_long_message_is_refused_by_the_preflight_before_send(
    live_app: LiveApp, served_engine: ProviderConnection, actors: Actors, chromium_path: str, artifacts: Path
) -> None:
    conversation = conversation_create(
        user=actors.teammate, connection_id=served_engine.pk, model_id=ENGINE_MODEL_ID
    )
    console = Console()

    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        log_in(page, live_app.url)
        open_chat(page, live_app.url, conversation)
        box = page.get_by_label("Message", exact=True)
        box.fill("What is the capital of France?")
        expect(page.locator("#preflight")).to_contain_text("in (counted)", timeout=TIMEOUT_MS)

        box.fill(TOO_LONG)
        window = page.locator("#preflight-window")
        expect(window).to_contain_text("Send would be refused: the prompt is", timeout=TIMEOUT_MS)
        expect(window).to_contain_text(
            "tokens (counted), but the model's context window is 2,048 tokens (as served)"
        )
        page.screenshot(path=artifacts / "context-window-preflight-1280.png")
        page.set_viewport_size(PHONE)
        expect(window).to_be_visible()
        page.screenshot(path=artifacts / "context-window-preflight-390.png")
        page.set_viewport_size(DESKTOP)

        box.press("Enter")
        expect(page.locator("#chat-notice")).to_contain_text("Not sent: the prompt is", timeout=TIMEOUT_MS)
        expect(page.locator("#chat-notice")).to_contain_text("2,048 tokens (as served)")
        expect(page.locator(".message-user")).to_have_count(0)

        drawer_open(page, "#composer-settings")
        expect(page.locator("#composer-settings")).to_contain_text(
            "Up to 2,048 (the model's context window, as served)."
        )
        page.screenshot(path=artifacts / "context-window-settings-1280.png")

    assert not Message.objects.exists() and not UsageRecord.objects.exists()
    assert console.problems == []
