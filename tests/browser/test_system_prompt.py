"""The system prompt changed mid-conversation, in a real browser against the loopback fake
Workers AI (issue 36): edited in Settings, the next turn sends it, the history shows where it
changed, and that turn's lost prefix is explained as the system prompt's change. Screenshots at
1280x800 and 390x844 go to `test-artifacts/`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import ViewportSize, expect

from playground.chat.models import Conversation, SystemPromptChange
from tests.browser.test_branches import idle, send
from tests.fakes.upstream import FakeUpstream, native_frame, sse, usage
from tests.support.actors import Actors
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


def system_sent(upstream: FakeUpstream) -> list[str]:
    return [m["content"] for m in upstream.requests[-1].json["messages"] if m["role"] == "system"]


def test_a_system_prompt_changed_in_settings_is_sent_next_marked_in_the_history_and_names_the_break(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    conversation = fake_workers_chat(actors, fake_upstream)
    Conversation.objects.filter(pk=conversation.pk).update(system_prompt="Answer in one sentence.")
    answer = fake_upstream.default_text
    # The second turn finds the first's prefix cached; the third, after the change, finds none.
    fake_upstream.script(
        *(
            sse([native_frame(answer), native_frame("", usage=usage(prompt, 5, cached=cached))])
            for prompt, cached in ((100, 0), (200, 100), (300, 0))
        )
    )
    console = Console()

    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        log_in(page, live_app.url, then=f"/chat/{conversation.pk}/")
        open_chat(page, live_app.url, conversation)
        send(page, "What is a rake for?")
        send(page, "And a hoe?")
        assert system_sent(fake_upstream) == ["Answer in one sentence."]

        drawer_open(page, "#composer-settings")
        prompt = page.locator("#id_system_prompt")
        expect(prompt).to_have_value("Answer in one sentence.")
        prompt.fill("Answer as a pirate, in one sentence.")
        page.get_by_role("button", name="Save settings").click()
        expect(page.locator("#composer-settings .notice-ok")).to_be_visible()
        page.locator("#composer-settings [data-drawer-close]").first.click()

        # The history says where it changed, before the next turn is sent...
        mark = page.locator(".messages .system-change")
        expect(mark).to_have_count(1)
        expect(mark).to_contain_text("System prompt changed")
        send(page, "And a spade?")
        assert system_sent(fake_upstream) == ["Answer as a pirate, in one sentence."]
        idle(page)

        # ... and after it: between the second answer and the third question, with both versions.
        page.reload()
        expect(mark).to_have_count(1)
        before_third = page.locator(".system-change + .message-user .bubble")
        expect(before_third).to_have_text("And a spade?")
        mark.locator("summary").click()
        expect(mark).to_contain_text("Answer in one sentence.")
        expect(mark).to_contain_text("Answer as a pirate, in one sentence.")
        notice = page.locator(".message-assistant").last.locator(".cache-break")
        expect(notice).to_contain_text("Cache broke here: the system prompt changed.")
        page.screenshot(path=artifacts / "system-prompt-changed-1280.png", full_page=True)

    with browser_page(chromium_path, viewport=PHONE) as phone:
        log_in(phone, live_app.url, then=f"/chat/{conversation.pk}/")
        expect(phone.locator(".messages .system-change")).to_have_count(1)
        phone.locator(".messages .system-change").scroll_into_view_if_needed()
        phone.screenshot(path=artifacts / "system-prompt-changed-390.png")

    assert console.problems == []
    change = SystemPromptChange.objects.get()
    assert (change.before, change.after, change.user_id) == (
        "Answer in one sentence.",
        "Answer as a pirate, in one sentence.",
        actors.teammate.pk,
    )
