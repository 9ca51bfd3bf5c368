"""JSON-schema output in a real browser, with the real engine, under the strict CSP.

A schema that breaks the 2020-12 meta-schema is refused in the settings panel with its
JSON path (nothing saved); a good one is saved with a few parameters; the engine then
answers under it (streamed: the engine can), and the page shows the answer as pretty JSON
marked valid, with "View request" showing the body as sent and the HTTP status.
Screenshots go to `test-artifacts/` (and `/tmp/shots/composer/` when it exists).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings
from playwright.sync_api import Page, expect

from playground.chat.models import Conversation, Message, MessageRole
from playground.usage.models import UsageRecord
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, drawer_open, engine_chat, log_in, open_chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANSWER_TIMEOUT_MS = 120_000
SHOTS = Path("/tmp/shots/composer")
# Only constraints the engine's output grammar enforces (numeric bounds it cannot: a 270M
# model then happily answers an age of 10^15, which the page rightly marks invalid).
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 16},
        "pet": {"type": "string", "enum": ["cat", "dog", "none"]},
    },
    "required": ["name", "pet"],
    "additionalProperties": False,
}
BROKEN = {"type": "object", "properties": {"age": {"type": "integr"}}}


def shot(page: Page, artifacts: Path, name: str) -> None:
    page.screenshot(path=artifacts / name, full_page=True)
    if SHOTS.is_dir():
        shutil.copy(artifacts / name, SHOTS / name)


def type_schema(page: Page, schema: dict[str, Any]) -> None:
    editor = page.locator("#composer-settings .cm-content")
    expect(editor).to_be_visible()
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(json.dumps(schema, indent=2))  # no key events: no auto-closed brackets


def test_the_engine_answers_a_json_schema_request_and_the_page_shows_it_valid(
    live_app: LiveApp,
    running_engine: Any,
    actors: Actors,
    settings: LazySettings,
    chromium_path: str,
    artifacts: Path,
) -> None:
    conversation = engine_chat(actors, settings, running_engine)
    console = Console()

    with browser_page(chromium_path, console=console) as page:
        log_in(page, live_app.url)
        open_chat(page, live_app.url, conversation)

        # The engine takes no penalties and does not reason: those are disabled, with why.
        drawer_open(page, "#composer-settings")
        expect(page.locator("#id_presence_penalty")).to_be_disabled()
        expect(page.locator("#setting-presence_penalty")).to_contain_text("do not take presence penalty")
        expect(page.locator("#id_reasoning_effort")).to_be_disabled()

        # A schema that breaks the meta-schema is refused with its path; nothing is saved.
        page.locator("input[name=response_format][value=json_schema]").check()
        page.locator("#id_schema_name").fill("person")
        type_schema(page, BROKEN)
        page.get_by_role("button", name="Save settings").click()
        expect(page.locator("#schema-errors")).to_contain_text("$.properties.age.type")
        expect(page.locator("#composer-settings")).to_contain_text("Nothing was saved")
        expect(page.locator("#composer-settings .composer-summary")).to_have_text("Model defaults · text")
        page.locator("#schema-errors").scroll_into_view_if_needed()
        shot(page, artifacts, "schema-01-refused-schema.png")

        # A good schema and a few parameters are saved.
        type_schema(page, PERSON)
        page.locator("#id_temperature").fill("0")
        page.locator("#id_max_tokens").fill("120")
        page.locator("#id_seed").fill("7")
        page.get_by_role("button", name="Save settings").click()
        expect(page.locator("#composer-settings .notice-ok")).to_be_visible()
        expect(page.locator("#composer-settings .composer-summary")).to_contain_text("JSON schema person")
        page.locator("#id_schema_name").scroll_into_view_if_needed()
        shot(page, artifacts, "schema-02-saved-settings.png")
        page.locator("#composer-settings > summary").click()

        # The engine answers under the schema; the page shows it valid.
        box = page.get_by_label("Message")
        box.fill("Invent a person.")
        box.press("Enter")
        answer = page.locator(".message-assistant:not(.is-streaming)").last
        badge = answer.locator(".structured .badge")
        expect(badge).to_be_visible(timeout=ANSWER_TIMEOUT_MS)
        assert badge.text_content() == "valid", answer.inner_text()
        expect(answer.locator(".json-block")).to_contain_text('"name":')

        request_info = answer.locator(".request-info", has_text="View request")  # not "View code"
        request_info.locator("> summary").click()
        expect(request_info.locator(".request-info-body")).to_contain_text('"json_schema"')
        expect(request_info.locator(".request-facts")).to_contain_text("200")
        shot(page, artifacts, "schema-03-valid-answer.png")

    assert console.problems == []
    stored = Message.objects.get(role=MessageRole.ASSISTANT)
    assert stored.structured == {"valid": True, "errors": []}
    record = UsageRecord.objects.get()
    assert record.streamed is True  # the engine streams JSON-schema answers
    assert record.request_body is not None
    assert record.request_body["response_format"]["json_schema"]["schema"] == PERSON
    assert record.request_body["temperature"] == 0 and record.request_body["max_tokens"] == 120
    assert record.http_status == 200
    assert isinstance(json.loads(stored.content), dict)
    conversation.refresh_from_db()
    assert isinstance(conversation, Conversation) and conversation.parameters["seed"] == 7
