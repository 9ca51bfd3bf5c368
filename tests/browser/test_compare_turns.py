"""Compare over three turns in a real browser, against the loopback fake Workers AI.

The comparison (Kimi at two temperatures) runs its first turn as its page opens; the next two
are typed in the one box and go to both columns. Each column's answer names its temperature
and the turn it answers, with usage that grows each turn (cached tokens from turn 2 on), so
each cell shows its own cost, cached share and TTFT, and each column's foot their totals. The
pre-flight prices the next turn per column and in all (the form, before, the first).
"Continue with this one" opens a conversation holding the column's three turns. Screenshots at
1280x800 and 390x844 go to `test-artifacts/`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from playground.catalog.seed import KIMI_K26
from playground.chat.compare.services import Target, comparison_create
from playground.chat.models import Message, MessageRole
from playground.usage.models import RequestPath, UsageRecord
from tests.fakes.upstream import FakeUpstream, RecordedRequest, Sse, computed, native_frame, sse, usage
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, fake_workers_chat, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
TIMEOUT_MS = 30_000
DURATION = re.compile(r"^\d+(\.\d)? m?s$")  # "120 ms", "1.4 s"
FOLLOW_UPS = ("And a second one?", "A third, please.")


def answer_by_column(request: RecordedRequest) -> Sse:
    """ "Turn 2 at 0.9: teal.", with 100 prompt tokens a turn, 40 of each earlier turn's cached."""
    turn = sum(1 for message in request.json["messages"] if message["role"] == "user")
    text = f"Turn {turn} at {request.json['temperature']}: teal."
    return sse([native_frame(text), native_frame("", usage=usage(100 * turn, 9, cached=40 * (turn - 1)))])


def turn_answered(page: Page, index: int) -> None:
    """Both columns' answers to the turn at `index` are stored, and the run is over."""
    turn = page.locator(".compare-turn").nth(index)
    expect(turn.locator('.compare-cell[data-state="done"]')).to_have_count(2, timeout=TIMEOUT_MS)
    expect(turn.locator(".figure-cost")).to_have_count(2)
    expect(page.locator("#compare-rerun")).to_be_visible()


def send(page: Page, text: str, index: int) -> None:
    box = page.get_by_label("Next turn, sent to every column")
    box.fill(text)
    page.get_by_role("button", name="Send to every column").click()
    expect(page.locator(".compare-turn").nth(index).locator(".compare-prompt")).to_have_text(text)
    expect(box).to_have_value("")  # the box empties once the turn is under way
    turn_answered(page, index)


def test_three_turns_in_sync_with_figures_per_turn_and_in_total_then_continue(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    conversation = fake_workers_chat(actors, fake_upstream)
    comparison = comparison_create(
        user=actors.teammate,
        prompt="Name a colour.",
        system_prompt="Be brief.",
        targets=[
            Target(conversation.connection_id or 0, KIMI_K26, {"temperature": 0.2, "max_tokens": 64}),
            Target(conversation.connection_id or 0, KIMI_K26, {"temperature": 0.9, "max_tokens": 64}),
        ],
    )
    fake_upstream.script(*[computed(answer_by_column)] * 6)
    shots = Path("/tmp/shots/compare-turns")
    shots.mkdir(parents=True, exist_ok=True)
    console = Console()

    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        log_in(page, live_app.url, then="/chat/compare/")
        page.get_by_label("Prompt", exact=True).fill(
            "Name a colour."
        )  # the form prices the first turn as it is filled in
        expect(page.locator("#compare-preflight")).to_contain_text(
            "First turn, every column sent", timeout=TIMEOUT_MS
        )
        expect(page.locator(".compare-preflight-column")).to_have_count(2)
        page.screenshot(path=shots / "compare-form-1280.png", full_page=True)
        page.goto(f"{live_app.url}/chat/compare/{comparison.pk}/")
        turn_answered(page, 0)  # started by the page itself
        expect(page.locator("#compare-preflight-expected")).to_contain_text("$", timeout=TIMEOUT_MS)
        send(page, FOLLOW_UPS[0], 1)
        send(page, FOLLOW_UPS[1], 2)

        turns = page.locator(".compare-turn")
        expect(turns).to_have_count(3)
        for index in range(3):
            for column, temperature in enumerate((0.2, 0.9)):
                cell = turns.nth(index).locator(".compare-cell").nth(column)
                expect(cell.locator(".bubble")).to_have_text(f"Turn {index + 1} at {temperature}: teal.")
                expect(cell.locator(".figure-cost")).to_contain_text("$")
                expect(cell.locator(".figure-ttft")).to_have_text(DURATION)
        third = turns.nth(2).locator(".compare-cell").first
        expect(third.locator(".figure-cached")).to_have_text("80 cached (27%)")  # 80 of 300
        feet = page.locator(".compare-foot")
        expect(feet).to_have_count(2)
        for index in range(2):
            foot = feet.nth(index)
            expect(foot).to_contain_text("3 answered turns")
            expect(foot.locator(".total-tokens")).to_contain_text("600 in")
            expect(foot.locator(".total-cached")).to_have_text("120 cached (20%)")  # 0 + 40 + 80 of 600
            expect(foot.locator(".total-cost")).to_contain_text("$")
            expect(foot.locator(".total-ttft")).to_contain_text(" mean")
        expect(page.locator("#compare-preflight-at-most")).to_contain_text("$", timeout=TIMEOUT_MS)
        expect(page.locator(".compare-preflight-column")).to_have_count(2)
        page.locator("#compare-history summary").click()
        expect(page.locator("#compare-history tbody tr")).to_have_count(3)
        expect(page.locator("#compare-history")).to_contain_text("Turn 3 sent")

        page.screenshot(path=artifacts / "compare-turns-desktop.png", full_page=True)
        page.screenshot(path=shots / "compare-turns-1280.png", full_page=True)
        page.set_viewport_size(PHONE)
        page.screenshot(path=artifacts / "compare-turns-phone.png", full_page=True)
        page.screenshot(path=shots / "compare-turns-390.png", full_page=True)
        page.screenshot(path=shots / "compare-turns-390-fold.png")
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, "the page fits a phone's width"
        page.set_viewport_size(DESKTOP)

        feet.nth(1).get_by_role("button", name="Continue with this one").click()
        expect(page).to_have_url(re.compile(rf"^{re.escape(live_app.url)}/chat/(?!{conversation.pk}/)\d+/$"))
        expect(page.locator(".message-user .bubble")).to_have_text(["Name a colour.", *FOLLOW_UPS])
        expect(page.locator(".message-assistant .bubble")).to_have_text(
            [f"Turn {turn} at 0.9: teal." for turn in (1, 2, 3)]
        )
        page.screenshot(path=shots / "compare-turns-continued-1280.png")

    assert console.problems == []
    assert UsageRecord.objects.filter(path=RequestPath.COMPARE).count() == 6, "one record per turn per column"
    continued = Message.objects.filter(role=MessageRole.ASSISTANT).exclude(conversation=conversation)
    assert continued.count() == 3 and all(message.usage_record_id for message in continued)
