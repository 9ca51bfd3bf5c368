"""Compare in a real browser, on the real embedded engine's two models.

From a conversation on SmolLM2, "Compare models" opens the form with the conversation's target
first; the second target is Gemma 3 270M. The comparison runs as soon as its page opens: both
columns stream side by side and end with their four figures (tokens in / cached / out, cost,
TTFT, latency). "Rerun last turn" runs both again (new records, the first answers kept as the
turn's earlier run), and "Continue with this one" on Gemma's column opens a conversation that
holds that column's turn. Screenshots at 1280x800 and
390x844 go to `test-artifacts/`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings
from playwright.sync_api import Locator, Page, expect

from playground.chat.models import ComparisonAnswer, Conversation, Message, MessageRole
from playground.usage.models import RequestPath, UsageRecord, UsageStatus
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, engine_chat, log_in
from tests.support.engine import GEMMA

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUN_TIMEOUT_MS = 120_000
PROMPT = "Name one colour of the sky."
DURATION = re.compile(r"^\d+(\.\d)? m?s$")  # "120 ms", "1.4 s"


def expect_figures(column: Locator) -> None:
    """The column ended with its four figures."""
    expect(column.locator(".figure-tokens")).to_contain_text(" in")
    expect(column.locator(".figure-tokens")).to_contain_text("cached")
    expect(column.locator(".figure-tokens")).to_contain_text(" out")
    expect(column.locator(".figure-cost")).to_contain_text("$")
    expect(column.locator(".figure-ttft")).to_have_text(DURATION)
    expect(column.locator(".figure-latency")).to_have_text(DURATION)


def wait_for_run(page: Page) -> None:
    # A column never run is drawn "done" too (with "Not run yet."): on the page's first load,
    # wait for the run it starts itself to have replaced them, or this returns before it began.
    expect(page.locator(".compare-cell", has_text="Not run yet.")).to_have_count(0, timeout=RUN_TIMEOUT_MS)
    expect(page.locator('.compare-cell[data-state="done"]')).to_have_count(2, timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#compare-rerun")).to_be_visible()


def test_two_engine_models_side_by_side_then_continue_with_one(
    live_app: LiveApp,
    running_engine: Any,
    actors: Actors,
    settings: LazySettings,
    chromium_path: str,
    artifacts: Path,
) -> None:
    conversation = engine_chat(actors, settings, running_engine)
    conversation.system_prompt = "Answer in one short sentence."
    conversation.save()
    gemma = f"{conversation.connection_id}:{GEMMA}"
    console = Console()

    with browser_page(chromium_path, console=console, viewport={"width": 1280, "height": 800}) as page:
        log_in(page, live_app.url, then=f"/chat/{conversation.pk}/")
        page.get_by_role("link", name="Compare models").click()
        expect(page.locator("#compare-source")).to_contain_text("With the setup of")
        expect(page.locator("#id_t0-target")).to_have_value(
            f"{conversation.connection_id}:{running_engine.model_id}"
        )
        page.locator("#id_t1-target").select_option(gemma)
        page.locator("#id_t0-max_tokens").fill("24")
        page.locator("#id_t1-max_tokens").fill("24")
        page.get_by_label("Prompt").fill(PROMPT)
        page.screenshot(path=artifacts / "compare-01-form.png", full_page=True)
        page.set_viewport_size({"width": 390, "height": 844})
        page.screenshot(path=artifacts / "compare-01-form-phone.png")
        page.set_viewport_size({"width": 1280, "height": 800})
        page.get_by_role("button", name="Compare").click()

        expect(page.locator(".compare-prompt")).to_have_text(PROMPT)
        wait_for_run(page)  # started by the page itself, no click
        columns = page.locator(".compare-cell")
        expect(columns.nth(0)).to_contain_text(running_engine.model_id)
        expect(columns.nth(1)).to_contain_text(GEMMA)
        for index in range(2):
            expect_figures(columns.nth(index))
        page.screenshot(path=artifacts / "compare-02-desktop.png")
        page.set_viewport_size({"width": 390, "height": 844})
        page.screenshot(path=artifacts / "compare-03-phone.png")
        page.screenshot(path=artifacts / "compare-04-phone-full.png", full_page=True)
        page.set_viewport_size({"width": 1280, "height": 800})

        page.locator("#compare-rerun").click()
        expect(page.locator('.compare-cell[data-state="streaming"]').first).to_be_attached()
        wait_for_run(page)
        expect(page.locator(".compare-earlier")).to_have_count(2)  # each column keeps its first answer
        page.screenshot(path=artifacts / "compare-06-rerun.png")

        page.locator(".compare-foot").nth(1).get_by_role("button", name="Continue with this one").click()
        expect(page).to_have_url(re.compile(rf"^{re.escape(live_app.url)}/chat/(?!{conversation.pk}/)\d+/$"))
        expect(page.locator(".chat-meta code")).to_have_text(GEMMA)
        expect(page.locator(".message-user .bubble")).to_have_text(PROMPT)
        expect(page.locator(".message-assistant .usage-line")).to_contain_text(" in")
        page.screenshot(path=artifacts / "compare-05-continued.png")

    assert console.problems == []
    records = UsageRecord.objects.filter(path=RequestPath.COMPARE)
    assert records.count() == 4, "two columns, run twice"
    assert set(records.values_list("status", flat=True)) == {UsageStatus.OK}
    # Affinity is on for both: the rerun reaches the replica that holds the prompt, and says so.
    assert all(record.cached_tokens for record in records.filter(source__endswith=":2"))
    rerun = ComparisonAnswer.objects.select_related("usage_record").get(column__model_id=GEMMA, run=2)
    continued = Conversation.objects.exclude(pk=conversation.pk).get()
    assert (continued.model_id, continued.system_prompt) == (GEMMA, "Answer in one short sentence.")
    answer = Message.objects.get(conversation=continued, role=MessageRole.ASSISTANT)
    assert answer.content == rerun.content and answer.usage_record_id == rerun.usage_record_id
    assert rerun.usage_record is not None and rerun.usage_record.source.endswith(":2"), "the rerun's answer"
