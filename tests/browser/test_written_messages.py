"""Messages written by hand, in a real browser against the loopback fake Workers AI (issue 36):
an answer edited into the example the model should follow, and a message inserted after
another; both are new branches, nothing is sent until the next question, which carries them.
Screenshots at 1280x800 go to `test-artifacts/`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Locator, expect

from tests.browser.test_branches import DESKTOP, idle, send
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, fake_workers_chat, log_in, open_chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EXAMPLE = '{"tool": "rake", "price_usd": 24}'
HOE = '{"tool": "hoe", "price_usd": 19}'


def insert_after(message: Locator, role: str, text: str) -> None:
    """Write a `role` message after `message` with its Insert after form."""
    message.locator(".message-insert > summary").click()
    message.get_by_label(role).check()
    message.get_by_label("Text to insert").fill(text)
    message.get_by_role("button", name="Insert").click()


def test_an_answer_edited_and_a_message_inserted_are_branches_the_next_question_sends(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    conversation = fake_workers_chat(actors, fake_upstream)
    console = Console()

    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        log_in(page, live_app.url, then=f"/chat/{conversation.pk}/")
        open_chat(page, live_app.url, conversation)
        send(page, "Price of a rake, as JSON?")
        answer = page.locator(".message-assistant").last
        answer.locator(".message-edit > summary", has_text="Edit").click()
        answer.get_by_label("Edited answer").fill(EXAMPLE)
        answer.get_by_role("button", name="Save").click()

        written = page.locator(".message-assistant").last
        expect(written).to_contain_text("Written, not generated here")
        expect(written.locator(".branch-position")).to_have_text("2 / 2")  # the model's answer stays
        requests = len(fake_upstream.requests)

        insert_after(written, "User", "And of a hoe?")
        expect(page.locator(".message-user .bubble")).to_have_text(
            ["Price of a rake, as JSON?", "And of a hoe?"]
        )
        # An example answer to the inserted question.
        insert_after(page.locator(".message-user").last, "Assistant", HOE)
        expect(page.locator(".message-assistant", has_text="Written, not generated here")).to_have_count(2)
        assert len(fake_upstream.requests) == requests  # nothing was sent
        page.screenshot(path=artifacts / "written-messages-1280.png")

        # A written answer is deleted alone (a model's answer goes only with its question).
        page.on("dialog", lambda dialog: dialog.accept())
        page.locator(".message-assistant").last.get_by_role(
            "button", name="Delete this written answer"
        ).click()
        expect(page.locator(".message-assistant", has_text="Written, not generated here")).to_have_count(1)
        expect(page.locator(".message-user .bubble")).to_have_text(
            ["Price of a rake, as JSON?", "And of a hoe?"]
        )
        insert_after(page.locator(".message-user").last, "Assistant", HOE)
        expect(page.locator(".message-assistant", has_text="Written, not generated here")).to_have_count(2)

        send(page, "And of a spade?")
        idle(page)
        history = [(m["role"], m["content"]) for m in fake_upstream.requests[-1].json["messages"]]
        assert history[-5:] == [
            ("user", "Price of a rake, as JSON?"),
            ("assistant", EXAMPLE),
            ("user", "And of a hoe?"),
            ("assistant", HOE),
            ("user", "And of a spade?"),
        ]
    assert console.problems == []
