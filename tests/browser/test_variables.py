"""Prompt variables in a real browser against the loopback fake Workers AI (issue 36): a
placeholder written into the system prompt becomes a variable, the pre-flight says Send will be
refused until it has a value, the turn sends the values while the history keeps the placeholders,
the record page shows them, a comparison started from the conversation sends a value changed on
its form to every column, and the conversation saved as a preset configures a batch whose CSV
column fills the variable line by line. Screenshots at 1280x800 and 390x844 go to `test-artifacts/`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import ViewportSize, expect

from playground.batches.models import Batch
from playground.usage.models import UsageRecord
from tests.browser.test_branches import send
from tests.browser.test_presets import save_as_preset
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.batches import NO_QUEUE_MODEL
from tests.support.browser import (
    Console,
    LiveApp,
    browser_page,
    drawer_open,
    fake_workers_chat,
    log_in,
    open_chat,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
PROMPT = "You write to {{customer}} in {{language}}."


def test_variables_are_declared_filled_sent_recorded_and_fill_a_batch_by_column(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    conversation = fake_workers_chat(actors, fake_upstream, model_id=NO_QUEUE_MODEL)
    console = Console()

    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        log_in(page, live_app.url)
        open_chat(page, live_app.url, conversation)
        drawer_open(page, "#composer-settings")
        page.locator("#id_system_prompt").fill(PROMPT)
        page.get_by_role("button", name="Save settings").click()
        expect(page.locator("#composer-settings .notice-ok")).to_be_visible()
        page.locator("#composer-settings [data-drawer-close]").first.click()
        expect(page.locator("#variables-summary")).to_have_text("customer, language · 2 to fill")

        page.get_by_label("Message", exact=True).fill("Hello")
        expect(page.locator("#preflight-refusal")).to_contain_text(
            "Send will be refused: Fill in {{customer}}: the prompt uses it and it has no value."
        )

        drawer_open(page, "#variables-panel")
        expect(page.locator("#variables-unfilled")).to_contain_text("customer, language")
        page.locator("#variable-value-0").fill("Ada")
        page.locator("#variable-type-1").select_option("number")
        page.locator("#variable-value-1").fill("French")
        page.get_by_role("button", name="Save variables").click()
        expect(page.locator("#variables-panel .field-error")).to_have_text(
            "{{language}} is a number; 'French' is not one."
        )
        page.locator("#variable-type-1").select_option("text")
        page.get_by_role("button", name="Save variables").click()
        expect(page.locator("#variables-panel .notice-ok")).to_be_visible()
        expect(page.locator("#variables-summary")).to_have_text("customer, language")
        page.screenshot(path=artifacts / "variables-drawer-1280.png")
        page.locator("#variables-panel [data-drawer-close]").first.click()
        page.screenshot(path=artifacts / "variables-chat-1280.png")
        drawer_open(page, "#variables-panel")
        page.locator("#variables-panel [data-drawer-close]").first.click()
        expect(page.locator("#preflight-refusal")).to_have_count(0)

        send(page, "Hi, I am writing for {{customer}}.")
        sent = fake_upstream.requests[-1].json["messages"]
        assert sent[0] == {"role": "system", "content": "You write to Ada in French."}
        assert sent[-1] == {"role": "user", "content": "Hi, I am writing for Ada."}

        # A comparison from the conversation takes its variables; a value changed on its form
        # goes to every column.
        page.locator("#compare-link").click()
        expect(page.locator("#compare-var-customer")).to_have_value("Ada")
        page.locator("#compare-var-customer").fill("Grace")
        page.get_by_label("Prompt", exact=True).fill("Greet {{customer}}.")
        page.get_by_role("button", name="Compare", exact=True).click()
        expect(page.locator("#compare-variables")).to_contain_text("customer = Grace")
        expect(page.locator(".compare-cell .figure-cost")).to_have_count(2, timeout=30_000)
        page.screenshot(path=artifacts / "variables-compare-1280.png")
        columns = [request.json["messages"] for request in fake_upstream.requests[-2:]]
        assert [messages[0]["content"] for messages in columns] == ["You write to Grace in French."] * 2
        assert [messages[-1]["content"] for messages in columns] == ["Greet Grace."] * 2

        open_chat(page, live_app.url, conversation)
        save_as_preset(page, choice="A new preset", name="Letters")
        expect(page.locator("#version-1")).to_be_visible()
        page.locator("#version-1").get_by_role("link", name="Configure a batch").click()
        page.locator("#id_input_kind").select_option("csv")
        page.get_by_label("Paste").fill("topic,customer\nrakes,Grace\nhoes,Linus\n")
        page.get_by_label("Prompt template (CSV)").fill("Write about {topic}.")
        page.get_by_role("button", name="Check and preview").click()
        page.get_by_role("button", name="Confirm and run 2 items").click()
        expect(page.locator("#percent")).to_have_text("100 %", timeout=60_000)

    chat_record = UsageRecord.objects.get(conversation_id=conversation.pk)
    assert chat_record.variables == {"customer": "Ada", "language": "French"}
    compare_records = UsageRecord.objects.filter(path="compare")
    assert [record.variables for record in compare_records] == [
        {"customer": "Grace", "language": "French"}
    ] * 2
    batch = Batch.objects.get()
    assert sorted(UsageRecord.objects.filter(path="batch").values_list("variables", flat=True), key=str) == [
        {"customer": "Grace", "language": "French"},
        {"customer": "Linus", "language": "French"},
    ]
    assert {item.request["messages"][0]["content"] for item in batch.items.all()} == {
        "You write to Grace in French.",
        "You write to Linus in French.",
    }

    with browser_page(chromium_path, console=console, viewport=PHONE) as phone:
        log_in(phone, live_app.url, then=f"/usage/log/{chat_record.request_id}/")
        expect(phone.locator("#record-variables")).to_contain_text("customer")
        expect(phone.locator("#record-variables")).to_contain_text("Ada")
        phone.screenshot(path=artifacts / "variables-record-390.png", full_page=True)
        open_chat(phone, live_app.url, conversation)
        expect(phone.locator(".message-user .bubble").last).to_have_text("Hi, I am writing for {{customer}}.")
        phone.screenshot(path=artifacts / "variables-chat-390.png")
        drawer_open(phone, "#variables-panel")
        phone.screenshot(path=artifacts / "variables-drawer-390.png")
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390

    assert console.problems == []
