"""Branches in a real browser, against the loopback fake Workers AI.

Three turns are sent from the page; the second question is edited and sent again, which
makes a branch: the page shows "2 / 2" on the edited question and the third turn leaves the
screen. The arrows switch branches, and each time the next request's history, as the
upstream received it, is the branch on screen. Then the last answer is regenerated ("2 / 2"
on the answer, the same history sent again) and a turn is deleted. The arrows come back to
the leaf a branch was left on, and a fork's copied answers name their model and show their
usage. Screenshots at 1280x800 and 390x844 go to `test-artifacts/`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from playground.chat.models import Conversation, Message
from playground.usage.models import UsageRecord
from tests.fakes.upstream import FakeUpstream, native_frame, sse, usage
from tests.support.actors import Actors
from tests.support.browser import (
    Console,
    LiveApp,
    browser_page,
    fake_workers_chat,
    log_in,
    open_chat,
    turn_answered,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCOUT = "@cf/meta/llama-4-scout-17b-16e-instruct"
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
TIMEOUT_MS = 30_000


def idle(page: Page) -> None:
    """The answer streamed and was stored."""
    expect(page.locator("#composer-actions")).to_have_attribute("data-state", "idle", timeout=TIMEOUT_MS)
    expect(page.locator(".message-assistant.is-streaming")).to_have_count(0)


def send(page: Page, text: str) -> None:
    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")
    expect(page.locator(".message-user .bubble").last).to_have_text(text)
    idle(page)


def expect_questions(page: Page, texts: list[str]) -> None:
    expect(page.locator(".message-user .bubble")).to_have_text(texts, timeout=TIMEOUT_MS)


def edit_second_question(page: Page, text: str) -> None:
    """Edit the second question on screen and send it: a new branch, shown once answered."""
    second = page.locator(".message-user").nth(1)
    second.get_by_text("Edit", exact=True).click()
    second.get_by_label("Edited question").fill(text)
    second.get_by_role("button", name="Send").click()
    expect_questions(page, ["One", text])
    idle(page)


def history(upstream: FakeUpstream) -> list[str]:
    """The user and assistant contents of the last request the upstream received."""
    body = upstream.requests[-1].json
    return [m["content"] for m in body["messages"] if m["role"] in ("user", "assistant")]


def test_an_edited_question_makes_a_branch_and_the_next_request_sends_the_branch_on_screen(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    conversation = fake_workers_chat(actors, fake_upstream)
    answer = fake_upstream.default_text
    console = Console()
    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        page.on("dialog", lambda dialog: dialog.accept())
        log_in(page, live_app.url, then=f"/chat/{conversation.pk}/")
        open_chat(page, live_app.url, conversation)
        # Answers whose cached share grows with the shared prefix, and an edit that breaks it.
        fake_upstream.script(
            *(
                sse([native_frame(answer), native_frame("", usage=usage(prompt, 5, cached=cached))])
                for prompt, cached in ((100, 0), (200, 100), (300, 240), (200, 50))
            )
        )
        for text in ("One", "Two", "Three"):
            send(page, text)
        expect(page.locator(".message-assistant").last.locator(".usage-line")).to_contain_text(
            "240 cached (80%)"
        )

        # Edit the second question: a new branch, its switcher, and the old third turn off screen.
        edit_second_question(page, "Two, said differently")
        edited = page.locator(".message-user").nth(1)
        expect(edited.locator(".branch-position")).to_have_text("2 / 2")
        assert history(fake_upstream) == ["One", answer, "Two, said differently"]
        # What the edit cost in cache misses: the branched turn shows its own cached share.
        expect(page.locator(".message-assistant").last.locator(".usage-line")).to_contain_text(
            "50 cached (25%)"
        )
        # ... and says so as the answer finishes: 200 tokens of the 300-token prompt before it
        # were the same prefix, 50 came back cached; the diff shows the edited question.
        notice = page.locator(".message-assistant").last.locator(".cache-break")
        expect(notice).to_contain_text("Cache broke here: a message of turn 2 was edited.")
        expect(notice).to_contain_text("50 of 200 tokens an intact prefix would have brought back")
        notice.get_by_text("What changed").click()
        expect(notice.locator(".diff-removed")).to_have_text(['-     "content": "Two",'])
        expect(notice.locator(".diff-added")).to_have_text(['+     "content": "Two, said differently",'])
        page.screenshot(path=artifacts / "branches-01-switcher-1280.png")
        page.set_viewport_size(PHONE)
        edited.scroll_into_view_if_needed()
        page.screenshot(path=artifacts / "branches-02-switcher-390.png")
        page.set_viewport_size(DESKTOP)

        # Back to the first branch: the third turn is on screen again, and goes with the next request.
        edited.get_by_role("button", name="Previous branch").click()
        expect(page.locator(".message-user").nth(1).locator(".branch-position")).to_have_text("1 / 2")
        expect_questions(page, ["One", "Two", "Three"])
        send(page, "Four")
        assert history(fake_upstream) == ["One", answer, "Two", answer, "Three", answer, "Four"]

        # And to the edited branch again: the next request leaves the first branch out.
        page.locator(".message-user").nth(1).get_by_role("button", name="Next branch").click()
        expect(page.locator(".message-user").nth(1).locator(".branch-position")).to_have_text("2 / 2")
        expect_questions(page, ["One", "Two, said differently"])
        send(page, "Five")
        assert history(fake_upstream) == ["One", answer, "Two, said differently", answer, "Five"]

        # Regenerate the last answer: the same history again, and "2 / 2" on the answer.
        requests = len(fake_upstream.requests)
        page.locator(".message-assistant").last.get_by_role("button", name="Regenerate").click()
        expect(page.locator(".message-assistant").last.locator(".branch-position")).to_have_text("2 / 2")
        idle(page)
        assert len(fake_upstream.requests) == requests + 1
        assert history(fake_upstream) == ["One", answer, "Two, said differently", answer, "Five"]
        expect(page.locator(".message-assistant").last.locator(".branch-position")).to_have_text("2 / 2")
        expect(page.get_by_role("button", name="Regenerate")).to_have_count(1)  # on the last answer only
        page.screenshot(path=artifacts / "branches-03-regenerated-1280.png")

        # Delete the turn "Five" (its answers go with it), then send: the history skips it.
        page.locator(".message-user").last.get_by_role("button", name="Delete this turn").click()
        expect(page.locator(".message-user .bubble")).to_have_count(2)
        send(page, "Six")
        assert history(fake_upstream) == ["One", answer, "Two, said differently", answer, "Six"]
        page.screenshot(path=artifacts / "branches-04-after-delete-1280.png")

    assert not Message.objects.filter(content="Five").exists()
    # Eight requests (three turns, the edit, Four, Five, the regenerated answer, Six), each
    # with its record: the deleted turn's two records stay.
    assert (
        UsageRecord.objects.filter(conversation_id=conversation.pk).count()
        == len(fake_upstream.requests)
        == 8
    )
    assert console.problems == []


def test_a_conversation_forked_from_an_answer_opens_with_the_branch_up_to_it(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str
) -> None:
    conversation = fake_workers_chat(actors, fake_upstream)
    with browser_page(chromium_path, viewport=DESKTOP) as page:
        log_in(page, live_app.url, then=f"/chat/{conversation.pk}/")
        open_chat(page, live_app.url, conversation)
        send(page, "Keep this")
        send(page, "Not this")
        page.locator(".message-assistant").first.get_by_role("button", name="Fork").click()
        expect(page.locator(".chat-title")).to_have_text("Keep this (fork)")
        expect_questions(page, ["Keep this"])
        fork_url = page.url
        send(page, "In the fork")

    fork = Conversation.objects.exclude(pk=conversation.pk).get()
    assert fork_url.endswith(f"/chat/{fork.pk}/")
    assert history(fake_upstream) == ["Keep this", fake_upstream.default_text, "In the fork"]


def test_the_arrows_come_back_to_where_a_branch_was_left(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    """Branch A is left on the first of two answers to its last question (the second one,
    regenerated, is newer); an edit makes branch B; the arrows back to A show that first answer."""
    conversation = fake_workers_chat(actors, fake_upstream)
    answer = fake_upstream.default_text
    console = Console()
    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        log_in(page, live_app.url, then=f"/chat/{conversation.pk}/")
        open_chat(page, live_app.url, conversation)
        for text in ("One", "Two", "Three"):
            send(page, text)
        fake_upstream.script(
            sse([native_frame("A second answer to Three"), native_frame("", usage=usage(90, 5))])
        )
        page.locator(".message-assistant").last.get_by_role("button", name="Regenerate").click()
        expect(page.locator(".message-assistant").last).to_contain_text("A second answer to Three")
        idle(page)
        page.locator(".message-assistant").last.get_by_role("button", name="Previous branch").click()
        expect(page.locator(".message-assistant").last.locator(".branch-position")).to_have_text("1 / 2")

        edit_second_question(page, "Two, said differently")
        page.locator(".message-user").nth(1).get_by_role("button", name="Previous branch").click()

        expect_questions(page, ["One", "Two", "Three"])
        last = page.locator(".message-assistant").last
        expect(last.locator(".branch-position")).to_have_text("1 / 2")
        expect(last.locator(".bubble")).to_have_text(answer)
        page.screenshot(path=artifacts / "branches-05-back-where-left-1280.png")
        page.set_viewport_size(PHONE)
        last.scroll_into_view_if_needed()
        page.screenshot(path=artifacts / "branches-06-back-where-left-390.png")
        page.set_viewport_size(DESKTOP)
        send(page, "Four")  # and Send continues from there
        assert history(fake_upstream) == ["One", answer, "Two", answer, "Three", answer, "Four"]
    assert console.problems == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_a_fork_names_the_model_of_each_answer_and_shows_its_usage(
    live_app: LiveApp,
    actors: Actors,
    fake_upstream: FakeUpstream,
    chromium_path: str,
    artifacts: Path,
    viewport: ViewportSize,
) -> None:
    conversation = fake_workers_chat(actors, fake_upstream)
    turn_answered(actors, conversation, "Asked Kimi")
    Conversation.objects.filter(pk=conversation.pk).update(model_id=SCOUT)
    turn_answered(actors, conversation, "Asked Scout")
    records = list(UsageRecord.objects.filter(conversation_id=conversation.pk).order_by("id"))
    console = Console()
    with browser_page(chromium_path, console=console, viewport=viewport) as page:
        log_in(page, live_app.url, then=f"/chat/{conversation.pk}/")
        open_chat(page, live_app.url, conversation)
        page.locator(".message-assistant").last.get_by_role("button", name="Fork").click()
        expect(page.locator(".chat-title")).to_have_text("Asked Kimi (fork)")

        answers = page.locator(".message-assistant")
        for answer, record in zip([answers.nth(0), answers.nth(1)], records, strict=True):
            expect(answer.locator(".answer-model")).to_have_text(f"Answered by {record.model_id}")
            line = answer.locator(".usage-line")
            expect(line).to_contain_text(f"{record.prompt_tokens:,} in")
            expect(line).to_contain_text("from the original")
            expect(answer.get_by_text("View request")).to_be_visible()
        page.screenshot(path=artifacts / f"branches-07-fork-{viewport['width']}.png", full_page=True)

    fork = Conversation.objects.exclude(pk=conversation.pk).get()
    assert not UsageRecord.objects.filter(conversation_id=fork.pk).exists()
    assert UsageRecord.objects.count() == 2
    assert console.problems == []
