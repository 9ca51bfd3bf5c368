"""The shared layout in a real browser, at a laptop's 1280 x 800 and a phone's 390 x 844.

The chat page's Settings and Tools open as side drawers that leave the conversation
readable, keep their Save button in view, close with Escape or their close button, and
still save through htmx. An empty JSON editor shows no error mark (it means "none"). The
top bar's links stay reachable on a phone through the Menu button, on every main page.
Screenshots go to `test-artifacts/layout-*.png`.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from playwright.sync_api import FloatRect, Locator, Page, ViewportSize, expect

from playground.chat.models import Conversation, MessageRole
from playground.usage.budgets import budget_month
from playground.usage.models import BudgetLedger, TeamBudget
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, fake_workers_chat, log_in, open_chat
from tests.support.messages import message_append

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LAPTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
# A line of prose needs about this many pixels to read comfortably (some 60 characters).
READABLE_PX = 480
LINT_DELAY_MS = 800  # the editor lints 300 ms after the last change
TOP_LINKS = ["Conversations", "Batches", "Team", "Usage", "Request log"]


def box(locator: Locator) -> FloatRect:
    found = locator.bounding_box()
    assert found is not None, f"{locator} is not rendered"
    return found


def assert_fully_in_view(page: Page, locator: Locator) -> None:
    """Inside the viewport, and the topmost thing at its centre (not under another panel)."""
    viewport = page.viewport_size
    assert viewport is not None
    rect = box(locator)
    assert rect["x"] >= 0 and rect["y"] >= 0
    assert rect["x"] + rect["width"] <= viewport["width"]
    assert rect["y"] + rect["height"] <= viewport["height"]
    on_top = locator.evaluate(
        "(el) => { const r = el.getBoundingClientRect();"
        " const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);"
        " return el === hit || el.contains(hit); }"
    )
    assert on_top, f"{locator} is covered"


def a_conversation_with_history(actors: Actors, upstream: FakeUpstream) -> Conversation:
    conversation = fake_workers_chat(actors, upstream)
    for question, answer in [
        ("What does prompt caching save on a long system prompt?", "Cached input tokens are billed at a "
         "fraction of the fresh rate, so a long system prompt sent with every turn costs much less once "
         "the provider has cached it. Session affinity keeps the turns on one replica so the cache hits."),
        ("And when does it not help?", "When the prefix changes from one request to the next: a timestamp "
         "or a shuffled tool list at the top of the prompt breaks the cache on every turn."),
    ]:  # fmt: skip
        message_append(conversation=conversation, role=MessageRole.USER, content=question)
        message_append(conversation=conversation, role=MessageRole.ASSISTANT, content=answer)
    return conversation


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1280x800", "390x844"])
def test_the_settings_drawer_leaves_the_conversation_readable_with_save_in_view(
    live_app: LiveApp,
    actors: Actors,
    fake_upstream: FakeUpstream,
    chromium_path: str,
    artifacts: Path,
    viewport: dict[str, int],
) -> None:
    conversation = a_conversation_with_history(actors, fake_upstream)
    console = Console()
    size = f"{viewport['width']}x{viewport['height']}"

    with browser_page(chromium_path, console=console, viewport=viewport) as page:
        log_in(page, live_app.url)
        open_chat(page, live_app.url, conversation)
        # The pre-flight line loads after the page (htmx) and takes its height from the messages.
        expect(page.locator("#preflight .preflight-line")).to_be_visible()
        messages = page.locator("#messages")
        closed = box(messages)

        settings = page.locator("#composer-settings")
        settings.locator("> summary").click()
        drawer = settings.locator(".drawer")
        save = page.get_by_role("button", name="Save settings")
        expect(drawer).to_be_visible()
        assert_fully_in_view(page, save)
        page.screenshot(path=artifacts / f"layout-settings-drawer-{size}.png")

        if viewport is LAPTOP:  # the conversation moves aside, keeps its height, and stays readable
            assert box(messages)["height"] >= 0.9 * closed["height"]  # (its head may wrap a line)
            assert box(messages)["width"] >= READABLE_PX
            assert box(messages)["x"] + box(messages)["width"] <= box(drawer)["x"] + 1
            assert_fully_in_view(page, page.locator(".message-assistant .bubble").last)
        else:  # a phone gives the drawer the whole width
            assert box(drawer)["width"] == viewport["width"]

        # A save goes through htmx and comes back in the open drawer, Save still in view.
        page.locator("#id_temperature").fill("0.3")
        save.click()
        expect(settings.locator(".notice-ok")).to_be_visible()
        expect(settings).to_have_attribute("open", "")
        assert_fully_in_view(page, page.get_by_role("button", name="Save settings"))

        # Escape closes it and gives focus back to its toggle; the conversation has its room back.
        page.keyboard.press("Escape")
        expect(settings.locator(".drawer")).to_be_hidden()
        expect(settings.locator("> summary")).to_be_focused()
        assert box(messages) == closed

        # Tools: the same kind of drawer, closed with its button.
        tools = page.locator("#tools-panel")
        tools.locator("> summary").click()
        assert_fully_in_view(page, page.get_by_role("button", name="Save tools"))
        page.screenshot(path=artifacts / f"layout-tools-drawer-{size}.png")
        page.get_by_role("button", name="Close tools").click()
        expect(tools.locator(".drawer")).to_be_hidden()
        expect(tools.locator("> summary")).to_be_focused()

        if viewport is LAPTOP:  # one drawer at a time: opening one closes the other
            settings.locator("> summary").click()
            tools.locator("> summary").click()
            expect(settings.locator(".drawer")).to_be_hidden()
            expect(tools.locator(".drawer")).to_be_visible()

    assert console.problems == []
    conversation.refresh_from_db()
    assert conversation.parameters["temperature"] == 0.3


def test_the_drawer_opens_and_saves_from_the_keyboard(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str
) -> None:
    conversation = fake_workers_chat(actors, fake_upstream)

    with browser_page(chromium_path, viewport=LAPTOP) as page:
        log_in(page, live_app.url)
        open_chat(page, live_app.url, conversation)
        toggle = page.locator("#composer-settings > summary")
        toggle.focus()
        page.keyboard.press("Enter")
        expect(page.locator("#composer-settings .drawer")).to_be_visible()
        page.keyboard.press("Tab")  # into the drawer: its close button comes first
        expect(page.get_by_role("button", name="Close settings")).to_be_focused()
        page.keyboard.press("Tab")
        expect(page.locator("#id_system_prompt")).to_be_focused()  # then the system prompt
        page.keyboard.press("Tab")
        page.keyboard.type("0.5")  # the first parameter
        page.get_by_role("button", name="Save settings").focus()
        page.keyboard.press("Enter")
        expect(page.locator("#composer-settings .notice-ok")).to_be_visible()
        expect(page.get_by_role("button", name="Save settings")).to_be_focused()  # kept across the swap
        page.keyboard.press("Escape")
        expect(page.locator("#composer-settings .drawer")).to_be_hidden()
        expect(toggle).to_be_focused()

    conversation.refresh_from_db()
    assert next(iter(conversation.parameters.values())) == 0.5


def test_an_empty_json_editor_shows_no_error_mark(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    conversation = fake_workers_chat(actors, fake_upstream)

    with browser_page(chromium_path, viewport=LAPTOP) as page:
        log_in(page, live_app.url)
        open_chat(page, live_app.url, conversation)
        page.locator("#tools-panel > summary").click()
        editor = page.locator("#tools-panel .cm-editor")
        expect(editor).to_be_visible()
        errors = editor.locator(".cm-lint-marker-error, .cm-lintRange-error")

        page.wait_for_timeout(LINT_DELAY_MS)
        expect(errors).to_have_count(0)
        page.screenshot(path=artifacts / "layout-empty-editor.png")

        editor.locator(".cm-content").click()  # broken JSON is still marked...
        page.keyboard.insert_text("[{")
        expect(errors.first).to_be_visible(timeout=3000)
        page.keyboard.press("Control+A")  # ...and emptied again, it is not
        page.keyboard.press("Delete")
        page.wait_for_timeout(LINT_DELAY_MS)
        expect(errors).to_have_count(0)


MAIN_PAGES = {
    "conversations": "/chat/",
    "conversation": "/chat/{conversation}/",
    "batches": "/batches/",
    "usage": "/usage/",
    "request-log": "/usage/log/",
    "team": "/teams/",
}


@pytest.mark.parametrize("name", MAIN_PAGES)
def test_the_top_bar_links_are_reachable_on_a_phone(
    live_app: LiveApp,
    actors: Actors,
    fake_upstream: FakeUpstream,
    chromium_path: str,
    artifacts: Path,
    name: str,
) -> None:
    path = MAIN_PAGES[name].format(conversation=fake_workers_chat(actors, fake_upstream).pk)
    console = Console()

    with browser_page(chromium_path, console=console, viewport=PHONE) as page:
        log_in(page, live_app.url, "owner")
        page.goto(live_app.url + path)
        bar = page.locator(".topbar")
        assert box(bar)["x"] + box(bar)["width"] <= PHONE["width"]
        assert bar.evaluate("(el) => el.scrollWidth <= el.clientWidth"), "the top bar overflows"
        links = page.get_by_role("navigation", name="Main").get_by_role("link")
        expect(links.first).to_be_hidden()
        page.screenshot(path=artifacts / f"layout-phone-{name}.png")

        menu = page.get_by_role("button", name="Menu")
        assert_fully_in_view(page, menu)
        menu.click()
        expect(page.get_by_role("button", name="Menu", expanded=True)).to_be_visible()
        for label in TOP_LINKS:
            assert_fully_in_view(page, page.get_by_role("link", name=label, exact=True))
        assert_fully_in_view(page, page.get_by_role("button", name="Log out"))
        page.screenshot(path=artifacts / f"layout-phone-{name}-menu.png")

        page.keyboard.press("Escape")
        expect(links.first).to_be_hidden()
        menu.click()
        page.get_by_role("link", name="Usage", exact=True).click()
        expect(page).to_have_url(live_app.url + "/usage/")

        page.set_viewport_size(LAPTOP)  # wide again: the links are in the bar, no menu
        expect(menu).to_be_hidden()
        for label in TOP_LINKS:
            assert_fully_in_view(page, page.get_by_role("link", name=label, exact=True))
        page.goto(live_app.url + path)
        page.screenshot(path=artifacts / f"layout-laptop-{name}.png", full_page=True)

    assert console.problems == []


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1280x800", "390x844"])
def test_with_a_budget_banner_the_chat_still_fits_and_says_send_will_be_refused(
    live_app: LiveApp,
    actors: Actors,
    fake_upstream: FakeUpstream,
    chromium_path: str,
    artifacts: Path,
    viewport: ViewportSize,
) -> None:
    """The banner takes height from the chat, not from below the fold: the composer's pre-flight
    line, which says Send will be refused, is in view (issue 36, point 3)."""
    conversation = a_conversation_with_history(actors, fake_upstream)
    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal(1))
    BudgetLedger.objects.create(team=actors.team, month=budget_month(actors.team), spent_usd=Decimal(2))

    with browser_page(chromium_path, viewport=viewport) as page:
        log_in(page, live_app.url)
        open_chat(page, live_app.url, conversation)
        expect(page.locator(".budget-banner-exhausted")).to_contain_text("Every request is refused")
        page.get_by_label("Message").fill("One more question?")
        refusal = page.locator("#preflight-budget")
        expect(refusal).to_contain_text("Send will be refused: This request could cost up to")
        assert_fully_in_view(page, refusal)
        assert page.evaluate("document.documentElement.scrollHeight") <= viewport["height"]
        page.screenshot(path=artifacts / f"layout-budget-refused-{viewport['width']}.png")
