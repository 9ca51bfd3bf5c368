"""A conversation exported as JSON and imported back, in a real browser against the loopback fake
Workers AI (issue 36): Export JSON downloads the branch with its tool call and its image, Copy
JSON puts the same on the clipboard, the import page makes a new conversation of the file that
shows the same messages, and its next turn sends the same history. A refused paste stays in the
box with its problem named. Screenshots at 1280 and 390 px go to `test-artifacts/`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings
from playwright.sync_api import Page, expect

from playground.chat.models import Conversation
from tests.browser.test_branches import DESKTOP, PHONE, send
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, fake_workers_chat, log_in, open_chat
from tests.support.messages import WEATHER_TOOL, picture_and_weather_append

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def weather_chat(
    actors: Actors, fake_upstream: FakeUpstream, settings: LazySettings, tmp_path: Path
) -> Conversation:
    """The teammate's conversation on Kimi: a picture, then a tool round trip."""
    settings.MEDIA_ROOT = tmp_path / "media"
    conversation = fake_workers_chat(actors, fake_upstream)
    Conversation.objects.filter(pk=conversation.pk).update(
        title="Weather and a picture", tools=[WEATHER_TOOL]
    )
    picture_and_weather_append(conversation)
    return conversation


def without_date(document: dict[str, Any]) -> dict[str, Any]:
    return {**document, "playground": {**document["playground"], "exported_at": ""}}


def expect_weather_chat(page: Page) -> None:
    """The page shows the picture, the call with its result, and both answers."""
    expect(page.locator(".message-user .bubble")).to_have_text(
        ["What is in this picture?", "Weather in Oslo?"]
    )
    page.wait_for_function(
        "() => [...document.querySelectorAll('.message-images img')].every((i) => i.naturalWidth > 0)"
    )
    expect(page.locator(".message-images img")).to_have_count(1)
    call = page.locator(".tool-call")
    expect(call.locator(".tool-call-name")).to_have_text("weather")
    expect(call).to_contain_text("Sunny, 21 °C")
    expect(page.locator(".message-assistant .bubble")).to_have_text(["A red rectangle.", "Sunny in Oslo."])


def test_a_conversation_exported_and_imported_shows_and_sends_the_same_messages(
    live_app: LiveApp,
    actors: Actors,
    weather_chat: Conversation,
    fake_upstream: FakeUpstream,
    chromium_path: str,
    artifacts: Path,
    tmp_path: Path,
) -> None:
    console = Console()
    with browser_page(
        chromium_path, console=console, viewport=DESKTOP, permissions=["clipboard-read", "clipboard-write"]
    ) as page:
        log_in(page, live_app.url, then=f"/chat/{weather_chat.pk}/")
        open_chat(page, live_app.url, weather_chat)
        with page.expect_download() as download:
            page.get_by_role("link", name="Export JSON").click()
        exported = tmp_path / download.value.suggested_filename
        download.value.save_as(exported)
        assert exported.name == f"weather-and-a-picture-{weather_chat.pk}.json"
        document = json.loads(exported.read_text())
        roles = [message["role"] for message in document["messages"]]
        assert roles == ["user", "assistant", "user", "assistant", "tool", "assistant"]
        assert document["messages"][0]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
        assert document["messages"][3]["tool_calls"][0]["function"]["name"] == "weather"

        page.get_by_role("button", name="Copy JSON").click()
        expect(page.get_by_role("button", name="JSON copied")).to_be_visible()
        copied = json.loads(page.evaluate("navigator.clipboard.readText()"))
        assert without_date(copied) == without_date(document)

        # The import, from the conversation list: the file chosen, everything else by default.
        page.goto(f"{live_app.url}/chat/")
        page.get_by_role("link", name="import a conversation's JSON").click()
        expect(page.get_by_role("heading", name="Import a conversation")).to_be_visible()
        page.screenshot(path=artifacts / "conversation-import-1280.png", full_page=True)
        page.get_by_label("…or choose a file").set_input_files(exported)
        page.get_by_role("button", name="Import").click()
        page.wait_for_url(lambda url: "/import/" not in url and url.rstrip("/").split("/")[-1].isdigit())
        assert page.url != f"{live_app.url}/chat/{weather_chat.pk}/"
        expect(page.get_by_role("heading", name="Weather and a picture")).to_be_visible()
        expect_weather_chat(page)
        expect(page.locator(".message-assistant .written-note")).to_have_count(3)  # not generated here

        # Its next turn sends what the original's history was, then the new question.
        send(page, "And tomorrow?")
        received = fake_upstream.requests[-1].json["messages"]
        assert received[:-1] == document["messages"]
        assert received[-1] == {"role": "user", "content": "And tomorrow?"}
    assert console.problems == []


def test_a_refused_paste_stays_in_the_box_with_its_problem_named(
    live_app: LiveApp, actors: Actors, weather_chat: Conversation, chromium_path: str, artifacts: Path
) -> None:
    pasted = '{"model": "@cf/moonshotai/kimi-k2.6",\n "messages": [{"role": "user" "content": "Hi"}]}'
    with browser_page(chromium_path, viewport=PHONE) as page:
        log_in(page, live_app.url, then="/chat/import/")
        page.screenshot(path=artifacts / "conversation-import-390.png", full_page=True)
        page.get_by_label("Conversation JSON").fill(pasted)
        page.get_by_role("button", name="Import").click()
        expect(page.get_by_role("alert").first).to_contain_text("Nothing was imported")
        expect(page.locator(".import-problems")).to_have_text(
            "$: Not valid JSON: Expecting ',' delimiter at line 2, column 31."
        )
        expect(page.get_by_label("Conversation JSON")).to_have_value(pasted)
        page.screenshot(path=artifacts / "conversation-import-refused-390.png", full_page=True)
    assert Conversation.objects.count() == 1
