"""Presets in a real browser: a conversation's setup saved as a preset, changed and saved again
(v2), the two versions diffed, then v2 starts a conversation (whose turn's record names it) and
configures a batch (whose items' records name it). Against the loopback fake Workers AI.
Screenshots of the list and the diff at 1280x800 and 390x844 go to `test-artifacts/presets-*.png`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from playground.batches.models import Batch
from playground.chat.models import Conversation
from playground.presets.models import PresetVersion
from playground.usage.models import UsageRecord
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.batches import NO_QUEUE_MODEL, jsonl, prompts
from tests.support.browser import (
    Console,
    LiveApp,
    browser_page,
    chat_ready,
    drawer_open,
    fake_workers_chat,
    log_in,
    open_chat,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def save_as_preset(
    page: Page, *, choice: str, name: str = "", note: str = "", shot: Path | None = None
) -> None:
    page.locator(".preset-save > summary").click()
    page.locator("#preset-choice").select_option(label=choice)
    if name:
        page.locator("#preset-name").fill(name)
    if note:
        page.locator("#preset-note").fill(note)
    if shot is not None:
        page.screenshot(path=shot)
    page.get_by_role("button", name="Save preset version").click()


def test_a_preset_is_saved_changed_diffed_and_starts_a_conversation_and_a_batch(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    conversation = fake_workers_chat(actors, fake_upstream, model_id=NO_QUEUE_MODEL)
    Conversation.objects.filter(pk=conversation.pk).update(system_prompt="Answer in one sentence.")
    console = Console()

    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        log_in(page, live_app.url)
        open_chat(page, live_app.url, conversation)
        save_as_preset(
            page, choice="A new preset", name="Support triage", shot=artifacts / "presets-save-form-1280.png"
        )
        expect(page.locator("#preset-heading")).to_have_text("Support triage")
        expect(page.locator("#version-1")).to_be_visible()

        # Change a setting in the conversation, save again: version 2.
        open_chat(page, live_app.url, conversation)
        drawer_open(page, "#composer-settings")
        page.locator("#id_temperature").fill("0.9")
        page.get_by_role("button", name="Save settings").click()
        expect(page.locator("#composer-settings .notice-ok")).to_be_visible()
        page.locator("#composer-settings > summary").click()
        save_as_preset(page, choice="New version of “Support triage”", note="warmer")
        expect(page.locator("#version-2")).to_contain_text("warmer")
        page.screenshot(path=artifacts / "presets-detail-1280.png", full_page=True)

        page.locator("#diff-newest").click()
        expect(page.locator("#diff-heading")).to_have_text("Support triage: v1 → v2")
        expect(page.locator("#diff-parameters .diff-added .diff-new").first).to_contain_text(
            '"temperature": 0.9'
        )
        expect(page.locator("#diff-system_prompt")).to_have_count(0)  # unchanged fields are only named
        expect(page.locator("#diff-parameters .diff-unified")).to_be_hidden()
        page.screenshot(path=artifacts / "presets-diff-1280.png", full_page=True)
        page.select_option("select[name=view]", "unified")
        page.get_by_role("button", name="Show").click()
        expect(page.locator("#diff-parameters .diff-unified")).to_contain_text('+   "temperature": 0.9')
        page.screenshot(path=artifacts / "presets-diff-unified-1280.png", full_page=True)

        page.goto(live_app.url + "/presets/")
        expect(page.locator(".preset-table")).to_contain_text("v2")
        page.screenshot(path=artifacts / "presets-list-1280.png", full_page=True)

        # v2 starts a conversation; its turn's usage record names v2.
        page.goto(live_app.url + "/presets/")
        page.get_by_role("link", name="Support triage").click()
        page.locator("#version-2").get_by_role("button", name="Start conversation").click()
        expect(page.locator("#conversation-preset")).to_contain_text("Support triage v2")
        chat_ready(page)
        box = page.get_by_label("Message")
        box.fill("Hello")
        box.press("Enter")
        expect(page.locator(".message-assistant:not(.is-streaming)")).to_have_count(1, timeout=30_000)

        # v2 configures a batch: its connection and model run it, its settings go with each item.
        page.goto(live_app.url + "/presets/")
        page.get_by_role("link", name="Support triage").click()
        page.locator("#version-2").get_by_role("link", name="Configure a batch").click()
        expect(page.locator("#id_preset_version option:checked")).to_contain_text("Support triage v2")
        page.get_by_label("Paste").fill(jsonl(prompts(3)))
        page.get_by_role("button", name="Check and preview").click()
        expect(page.locator("#batch-preset")).to_have_text("Support triage v2")
        page.get_by_role("button", name="Confirm and run 3 items").click()
        expect(page.locator("#percent")).to_have_text("100 %", timeout=60_000)

    preset_id = PresetVersion.objects.get(number=2).preset_id  # not inside Playwright's event loop
    with browser_page(chromium_path, viewport=PHONE) as phone:
        log_in(phone, live_app.url, then="/presets/")
        phone.screenshot(path=artifacts / "presets-list-390.png", full_page=True)
        phone.goto(f"{live_app.url}/presets/{preset_id}/diff/")
        # A phone gets the unified diff (side by side needs the width); a wide screen the table.
        expect(phone.locator("#diff-parameters .diff-unified")).to_be_visible()
        expect(phone.locator("#diff-parameters .diff-side")).to_be_hidden()
        phone.screenshot(path=artifacts / "presets-diff-390.png", full_page=True)

    assert console.problems == []
    v1, v2 = PresetVersion.objects.order_by("number")
    assert v1.setup["parameters"] == {} and v2.setup["parameters"] == {"temperature": 0.9}
    assert v2.setup["system_prompt"] == "Answer in one sentence."
    started = Conversation.objects.exclude(pk=conversation.pk).get()
    assert started.preset_version == v2 and started.parameters == {"temperature": 0.9}
    chat_record = UsageRecord.objects.get(conversation_id=started.pk)
    assert chat_record.preset_version_id == v2.pk
    batch = Batch.objects.get()
    assert batch.preset_version == v2 and batch.model_id == NO_QUEUE_MODEL
    batch_records = UsageRecord.objects.filter(path="batch")
    assert batch_records.count() == 3
    assert set(batch_records.values_list("preset_version_id", flat=True)) == {v2.pk}
    item_request = batch.items.first().request  # type: ignore[union-attr]
    assert item_request["messages"][0] == {"role": "system", "content": "Answer in one sentence."}
    assert item_request["temperature"] == 0.9, json.dumps(item_request)
