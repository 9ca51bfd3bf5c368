"""Managing conversations in a real browser (Debian's headless Chromium), against a loopback
fake Workers AI upstream.

The list's search box finds a conversation by a word of its answer (another team's
conversation holding the same word stays out); a row is renamed and another deleted (its
usage record stays); Ctrl+K opens the quick switcher, which finds the same conversation
and opens it with Enter. In a chat, Ctrl+Enter sends and Escape stops the answer; the Model
drawer moves the next turn to another model, which the upstream receives and the answers
then name; the copy buttons copy an answer's markdown and a code block's text. Screenshots
(1280x800 and 390x844) go to `test-artifacts/`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import ViewportSize, expect

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import KIMI_K26, catalog_seed
from playground.chat.models import Conversation, Message, MessageRole
from playground.chat.services.conversations import conversation_create
from playground.usage.metering import STOPPED_BY_USER
from playground.usage.models import UsageRecord, UsageStatus
from tests.fakes.upstream import FakeUpstream, native_frame, sse, usage
from tests.support.actors import Actors
from tests.support.browser import (
    Console,
    LiveApp,
    browser_page,
    chat_ready,
    drawer_open,
    fake_workers_connection,
    log_in,
    open_chat,
    turn_answered,
)
from tests.support.sockets import SLOW_WORDS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDE: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
SCOUT = "@cf/meta/llama-4-scout-17b-16e-instruct"
ANSWER = "Pack a kaleidoscope for the long train ride, and book the sleeper early."
CODE_ANSWER = "Run this:\n\n```sh\ngrep -rn TODO src/ | wc -l\n```\n\nIt counts them."


def a_list_of_conversations(actors: Actors, fake_upstream: FakeUpstream) -> dict[str, Conversation]:
    catalog_seed(CatalogModel, PriceCard)  # a transactional test's flush empties the catalogue
    connection = fake_workers_connection(actors.team, fake_upstream)
    made = {}
    topics = [
        "Quarterly budget review",
        "Onboarding checklist",
        "Incident 4312 timeline",
        "Release notes draft",
    ]
    for topic in topics:
        conversation = conversation_create(
            user=actors.teammate, connection_id=connection.pk, model_id=KIMI_K26
        )
        turn_answered(actors, conversation, topic)
        made[topic] = conversation
    trip = conversation_create(user=actors.teammate, connection_id=connection.pk, model_id=KIMI_K26)
    fake_upstream.script(sse([native_frame(ANSWER), native_frame("", usage=usage(40, 16))]))
    turn_answered(actors, trip, "Travel notes for Helsinki")
    made["trip"] = trip
    # Another team's conversation holds the word too: it must never show.
    other = fake_workers_connection(actors.other_team, fake_upstream, token="cf-bravo")
    theirs = conversation_create(user=actors.outsider, connection_id=other.pk, model_id=KIMI_K26)
    Message.objects.create(conversation=theirs, role=MessageRole.ASSISTANT, content=ANSWER)
    Conversation.objects.filter(pk=theirs.pk).update(title="Bravo's kaleidoscope trip")
    return made


def test_the_list_searches_by_a_word_of_an_answer_renames_and_deletes(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    made = a_list_of_conversations(actors, fake_upstream)
    trip, doomed = made["trip"], made["Onboarding checklist"]
    record = UsageRecord.objects.get(conversation_id=doomed.pk)
    console = Console()

    with browser_page(chromium_path, viewport=WIDE, console=console) as page:
        log_in(page, live_app.url, "teammate")
        rows = page.locator(".conversation-row")
        expect(rows).to_have_count(5)
        page.screenshot(path=artifacts / "conversations-manage-1280.png")

        page.get_by_label("Search conversations").fill("kaleido")  # a word of the answer, as typed
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("Travel notes for Helsinki")
        expect(page.get_by_role("status")).to_contain_text("holds “kaleido”")
        expect(page).to_have_url(live_app.url + "/chat/?q=kaleido")
        page.screenshot(path=artifacts / "conversations-search-1280.png")

        rows.first.get_by_text("Rename").click()
        title = page.get_by_label("New title")
        expect(title).to_have_value("Travel notes for Helsinki")
        page.screenshot(path=artifacts / "conversations-rename-1280.png")
        title.fill("Helsinki by train")
        title.press("Enter")
        expect(rows.first.locator(".conversation-title")).to_have_text("Helsinki by train")

        page.set_viewport_size(PHONE)
        page.screenshot(path=artifacts / "conversations-search-390.png", full_page=True)

        page.get_by_label("Search conversations").fill("")
        expect(rows).to_have_count(5)
        page.screenshot(path=artifacts / "conversations-manage-390.png", full_page=True)
        page.set_viewport_size(WIDE)
        page.once("dialog", lambda dialog: dialog.accept())
        page.locator(f"#conversation-row-{doomed.pk}").get_by_text("Delete").click()
        expect(rows).to_have_count(4)
        expect(page.locator(f"#conversation-row-{doomed.pk}")).to_have_count(0)

    assert console.problems == []
    assert Conversation.objects.get(pk=trip.pk).title == "Helsinki by train"
    assert not Conversation.objects.filter(pk=doomed.pk).exists()
    assert UsageRecord.objects.get(pk=record.pk).conversation_id == doomed.pk  # its cost stays on record


def test_ctrl_k_finds_a_conversation_by_a_word_of_its_answer_and_enter_opens_it(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    made = a_list_of_conversations(actors, fake_upstream)

    with browser_page(chromium_path, viewport=WIDE) as page:
        log_in(page, live_app.url, "teammate")
        open_chat(page, live_app.url, made["Quarterly budget review"])
        page.keyboard.press("Control+k")
        switcher = page.get_by_role("dialog")
        expect(switcher).to_be_visible()
        options = switcher.get_by_role("option")
        expect(options).to_have_count(5)  # the most recent, before anything is typed
        page.keyboard.type("kaleidoscope train")
        expect(options).to_have_count(1)
        expect(options.first).to_contain_text("Travel notes for Helsinki")
        page.screenshot(path=artifacts / "quick-switcher-1280.png")
        page.keyboard.press("Enter")
        expect(page).to_have_url(f"{live_app.url}/chat/{made['trip'].pk}/")
        expect(page.locator(".chat-title")).to_have_text("Travel notes for Helsinki")

        page.locator("[data-open-switcher]").click()  # "Jump to…" in the top bar
        expect(switcher).to_be_visible()
        page.keyboard.press("Escape")
        expect(switcher).to_be_hidden()

        # Typed fast and Enter at once, before the search answered: the match opens, not the
        # most recent conversation the box showed before anything was typed (issue 36).
        page.keyboard.press("Control+k")
        expect(options).to_have_count(5)
        page.keyboard.press("Control+a")
        page.keyboard.type("Incident 4312")
        page.keyboard.press("Enter")
        expect(page).to_have_url(f"{live_app.url}/chat/{made['Incident 4312 timeline'].pk}/")


def test_keys_send_and_stop_the_model_changes_for_the_next_turn_and_copy_buttons_copy(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    catalog_seed(CatalogModel, PriceCard)
    connection = fake_workers_connection(actors.team, fake_upstream)
    conversation = conversation_create(user=actors.teammate, connection_id=connection.pk, model_id=KIMI_K26)
    console = Console()

    with browser_page(
        chromium_path, viewport=WIDE, console=console, permissions=["clipboard-read", "clipboard-write"]
    ) as page:
        log_in(page, live_app.url, "teammate")
        open_chat(page, live_app.url, conversation)
        box = page.get_by_label("Message")

        # Ctrl+Enter sends; Escape stops the answer while it streams.
        fake_upstream.script(sse(SLOW_WORDS, delay=0.2))
        box.fill("Count slowly")
        box.press("Control+Enter")
        expect(page.locator("#stop-button")).to_be_visible()
        expect(page.locator(".stream-text")).to_contain_text("word1")
        page.keyboard.press("Escape")
        expect(page.locator(".badge-status")).to_have_text("Stopped")
        expect(page.locator("#stop-button")).to_have_count(0)

        # The Model drawer sends the next turn to Llama 4 Scout; the answers then name their model.
        drawer_open(page, "#model-drawer")
        page.locator("#model-drawer select[name=model_id]").select_option(SCOUT)
        page.screenshot(path=artifacts / "model-drawer-1280.png")
        page.get_by_role("button", name="Use for the next message").click()
        expect(page.locator("#model-drawer .composer-summary")).to_have_text(SCOUT)
        chat_ready(page)
        fake_upstream.script(sse([native_frame(CODE_ANSWER), native_frame("", usage=usage(30, 20))]))
        box.fill("How many TODOs?")
        box.press("Enter")
        answer = page.locator(".message-assistant").last
        expect(answer.locator(".answer-model")).to_have_text(f"Answered by {SCOUT}")
        expect(page.locator(".message-assistant").first.locator(".answer-model")).to_have_text(
            f"Answered by {KIMI_K26}"
        )

        # Copy: the code block's text alone, then the whole answer as markdown.
        code = answer.locator(".answer-code")
        code.hover()
        page.screenshot(path=artifacts / "copy-buttons-1280.png")
        code.get_by_role("button", name="Copy code").click()
        expect(code.get_by_role("button", name="Copy code")).to_have_text("Copied")
        assert page.evaluate("navigator.clipboard.readText()") == "grep -rn TODO src/ | wc -l\n"
        answer.get_by_role("button", name="Copy answer (markdown)").click()
        assert page.evaluate("navigator.clipboard.readText()") == CODE_ANSWER

    assert console.problems == []
    stopped, finished = UsageRecord.objects.filter(conversation_id=conversation.pk).order_by("created_at")
    assert (stopped.status, stopped.error_code, stopped.model_id) == (
        UsageStatus.CLIENT_DISCONNECTED,
        STOPPED_BY_USER,
        KIMI_K26,
    )
    assert (finished.status, finished.model_id) == (UsageStatus.OK, SCOUT)
    assert fake_upstream.requests[-1].path.endswith(f"/ai/run/{SCOUT}")
