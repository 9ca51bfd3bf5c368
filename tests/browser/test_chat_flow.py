"""The whole chat flow in a real browser, against the real embedded engine.

Log in through the form, start a conversation on the engine connection, send a message
with Enter, and watch the answer stream in over the WebSocket (more than one frame of
text) until the stored answer replaces it with its usage line. Screenshots of the list,
an empty chat and a finished answer go to `test-artifacts/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings
from playwright.sync_api import Page, WebSocket, expect

from playground.chat.models import Conversation, Message, MessageRole
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.services import connection_save
from playground.usage.models import UsageRecord, UsageStatus
from tests.support.actors import Actors
from tests.support.browser import LiveApp, browser_page, chat_ready, engine_connection

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANSWER_TIMEOUT_MS = 90_000


class FrameLog:
    """Text frames the page's chat socket received."""

    def __init__(self) -> None:
        self.frames: list[str] = []

    def watch(self, socket: WebSocket) -> None:
        socket.on("framereceived", self._record)

    def _record(self, payload: Any) -> None:
        self.frames.append(payload if isinstance(payload, str) else payload.decode())

    def text_deltas(self) -> list[str]:
        return [
            frame
            for frame in self.frames
            if '-text" hx-swap-oob="beforeend"' in frame and "-reasoning-text" not in frame
        ]


def test_a_member_logs_in_starts_a_conversation_and_watches_the_answer_stream(
    live_app: LiveApp,
    running_engine: Any,
    actors: Actors,
    settings: LazySettings,
    chromium_path: str,
    artifacts: Path,
) -> None:
    engine_connection(actors, settings, running_engine)
    connection_save(  # a second kind, to watch the model picker follow the connection
        connection=ProviderConnection(
            team=actors.team, name="Cloudflare", kind=ConnectionKind.WORKERS_AI, account_id="0" * 32
        ),
        token="cf-unused",
    )
    frames = FrameLog()

    with browser_page(chromium_path, viewport={"width": 1280, "height": 820}) as page:
        page.on("websocket", frames.watch)
        run_flow(page, live_app.url, artifacts, frames, model_id=running_engine.model_id)
        page.set_viewport_size({"width": 390, "height": 780})
        page.screenshot(path=artifacts / "05-finished-answer-phone.png")

    conversation = Conversation.objects.get()
    assert conversation.user == actors.teammate
    answer = Message.objects.select_related("usage_record").get(role=MessageRole.ASSISTANT)
    assert answer.content
    assert answer.usage_record is not None
    assert answer.usage_record.status == UsageStatus.OK
    assert UsageRecord.objects.get().completion_tokens > 0


def run_flow(page: Page, base_url: str, artifacts: Path, frames: FrameLog, *, model_id: str) -> None:
    # Log in (as the teammate: a member, not the owner) through the real form.
    page.goto(base_url + "/")
    expect(page).to_have_url(base_url + "/login/?next=/chat/")
    page.get_by_label("Username").fill("teammate")
    page.get_by_label("Password").fill("password-teammate")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(base_url + "/chat/")
    expect(page.get_by_text("No conversations yet — start one")).to_be_visible()
    page.screenshot(path=artifacts / "01-conversation-list-empty.png", full_page=True)

    # The model picker follows the connection (an htmx swap), then start on the engine.
    connection = page.get_by_label("Connection")
    expect(connection.locator("option:checked")).to_have_text("Embedded engine")
    expect(page.locator("#id_model_id")).to_have_value(model_id)
    connection.select_option(label="Cloudflare · Cloudflare Workers AI")
    expect(page.locator("#id_model_id option[value='@cf/moonshotai/kimi-k2.6']")).to_have_count(1)
    connection.select_option(label="Embedded engine")
    expect(page.locator("#id_model_id")).to_have_value(model_id)  # the default of the engine's two
    expect(page.locator("#id_model_id option")).to_have_count(2)
    page.get_by_label("System prompt (optional)").fill("You are a concise assistant.")
    expect(page.get_by_label("Session affinity")).to_be_checked()
    page.get_by_role("button", name="Start conversation").click()
    expect(page.locator(".chat-title")).to_have_text("New conversation")
    expect(page.locator(".messages-empty")).to_be_visible()
    chat_ready(page)
    page.screenshot(path=artifacts / "02-empty-chat.png")

    # Send with Enter; the answer streams in, then its usage line appears.
    box = page.get_by_label("Message")
    box.fill("Name three primary colours, as a markdown list.")
    box.press("Enter")
    expect(page.locator(".message-user .bubble")).to_have_text(
        "Name three primary colours, as a markdown list."
    )
    expect(box).to_have_value("")  # cleared once the server accepted it
    expect(page.locator(".chat-title")).to_have_text("Name three primary colours, as a markdown list.")
    usage = page.locator(".message-assistant .usage-line:not(.usage-pending)")
    expect(usage).to_be_visible(timeout=ANSWER_TIMEOUT_MS)

    assert len(frames.text_deltas()) > 1, frames.frames
    line = usage.inner_text()
    assert " in" in line and " out" in line and "$" in line and "TTFT" in line
    expect(usage.locator(".price-label")).to_contain_text("Priced as Kimi K2.5")
    expect(page.locator(".message-assistant .bubble.markdown")).not_to_be_empty()
    expect(page.locator("#send-button")).to_be_enabled()
    expect(page.locator("#stop-button")).to_have_count(0)
    page.screenshot(path=artifacts / "03-finished-answer.png")

    # The list now shows the conversation, titled by its first message.
    page.get_by_role("link", name="Conversations").click()
    expect(page.locator(".conversation-title")).to_have_text(
        "Name three primary colours, as a markdown list."
    )
    page.screenshot(path=artifacts / "04-conversation-list.png", full_page=True)
    page.go_back()
    expect(usage).to_be_visible()
