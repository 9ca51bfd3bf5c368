"""View code and the pre-flight cost in a real browser, for a conversation with affinity on.

The conversation runs on an OpenAI-compatible connection to the loopback upstream. After one
answered turn, the user types the next message: the composer shows what it would cost; the
View code drawer shows it as code, and its Python (openai SDK) snippet is copied with its copy
button. The message is then sent from the page, and the copied snippet, run for real, must
reach the upstream with the same path, headers and body as the playground's own request.
Screenshots at 1280x800 and 390x844 go to `test-artifacts/`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from playground.catalog.seed import KIMI_K26
from playground.chat.models import Conversation
from playground.chat.services.conversations import conversation_create
from playground.providers.models import ProviderConnection
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, drawer_open, log_in, open_chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TOKEN = "sk-test-gateway"  # the openai_connection fixture's key
DRAFT = "What is 2 + 2? Answer in one word."
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}


@pytest.fixture
def affinity_chat(actors: Actors, openai_connection: ProviderConnection) -> Conversation:
    conversation = conversation_create(
        user=actors.teammate,
        connection_id=openai_connection.pk,
        model_id=KIMI_K26,
        system_prompt="Be brief.",
        use_affinity=True,
    )
    conversation.parameters = {"temperature": 0.2, "max_tokens": 200}
    conversation.save()
    return conversation


def send(page: Page, text: str, answers: int) -> None:
    box = page.get_by_label("Message")
    box.fill(text)
    box.press("Enter")
    expect(page.locator(".message-assistant .usage-line:not(.usage-pending)")).to_have_count(
        answers, timeout=30_000
    )


def test_the_copied_python_snippet_sends_what_the_playground_sends(
    live_app: LiveApp,
    actors: Actors,
    affinity_chat: Conversation,
    fake_upstream: FakeUpstream,
    chromium_path: str,
    artifacts: Path,
) -> None:
    console = Console()
    options = {"viewport": DESKTOP, "permissions": ["clipboard-read", "clipboard-write"]}
    with browser_page(chromium_path, console=console, **options) as page:
        log_in(page, live_app.url, then=f"/chat/{affinity_chat.pk}/")
        open_chat(page, live_app.url, affinity_chat)
        expect(page.locator("#preflight-at-most")).to_contain_text("at most $")  # shown before typing too
        send(page, "Hello", answers=1)
        # The answer that ended asks the line again (preflight.js): the history grew by a turn.
        expect(page.locator("#preflight")).to_contain_text("1 answered turn so far")

        # The pre-flight line follows the draft (debounced).
        before = page.locator("#preflight-at-most").inner_text()
        page.get_by_label("Message").fill(DRAFT * 20)
        expect(page.locator("#preflight-at-most")).not_to_have_text(before)
        longer = page.locator("#preflight-at-most").inner_text()
        page.get_by_label("Message").fill(DRAFT)
        expect(page.locator("#preflight-at-most")).not_to_have_text(longer)
        expect(page.locator("#preflight")).to_contain_text("expected $")
        expect(page.locator("#preflight")).to_contain_text("1 answered turn so far")
        expect(page.locator("#preflight-card")).to_contain_text("effective")
        page.screenshot(path=artifacts / "viewcode-01-preflight-1280.png")

        # View code of the next request: the draft is in it, with the affinity key.
        drawer_open(page, "#code-drawer")
        python = page.locator("#next-code-python-openai")
        expect(python).to_contain_text(DRAFT)
        expect(python).to_contain_text(f'"x-session-affinity": "{affinity_chat.affinity_key}"')
        expect(page.locator("#next-code-curl")).to_contain_text("x-session-affinity:")
        page.screenshot(path=artifacts / "viewcode-02-drawer-top-1280.png")
        page.locator("#next-code-python-openai-block > summary").click()
        page.get_by_role("button", name="Copy Python · openai").click()
        expect(page.get_by_role("button", name="Copied")).to_be_visible()
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied == python.text_content()
        page.screenshot(path=artifacts / "viewcode-02-drawer-python-1280.png")
        page.set_viewport_size(PHONE)
        page.screenshot(path=artifacts / "viewcode-03-drawer-390.png")

        # The gateway target: the same body to this app's /v1, with a team key placeholder.
        page.get_by_role("link", name="This app's gateway").click()
        expect(page.locator("#next-code-python-openai")).to_contain_text(f"{live_app.url}/v1")
        expect(page.locator("#next-code-python-openai")).to_contain_text("PLAYGROUND_API_KEY")
        page.screenshot(path=artifacts / "viewcode-04-gateway-390.png")
        page.locator("#code-drawer .drawer-close").click()
        page.screenshot(path=artifacts / "viewcode-05-preflight-390.png")
        page.set_viewport_size(DESKTOP)

        # Send the same message from the page; then run the copied snippet.
        send(page, DRAFT, answers=2)
        playground = fake_upstream.requests[-1]
        done = subprocess.run(
            [sys.executable, "-c", copied],
            env={**os.environ, "OPENAI_API_KEY": TOKEN},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        snippet = fake_upstream.requests[-1]

        # A past request's code sits under its answer.
        page.locator(".message-assistant").last.get_by_text("View code").click()
        past = page.locator(".message-assistant").last.locator(".code-panel")
        expect(past.locator(".code-block").first).to_contain_text(DRAFT)
        past.locator(".code-block").first.scroll_into_view_if_needed()
        page.screenshot(path=artifacts / "viewcode-06-past-request-1280.png")

    assert snippet is not playground and len(fake_upstream.requests) == 3
    assert snippet.path == playground.path == "/v1/chat/completions"
    for header in ("authorization", "x-session-affinity", "content-type"):
        assert snippet.headers[header] == playground.headers[header], header
    assert playground.headers["x-session-affinity"] == affinity_chat.affinity_key
    assert snippet.json == playground.json
    assert playground.json is not None and playground.json["messages"][-1]["content"] == DRAFT
    assert [m["role"] for m in playground.json["messages"]] == ["system", "user", "assistant", "user"]
    assert console.problems == []
