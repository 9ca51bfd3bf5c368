"""What browser tests share: Chromium's switches, the live app's address, a page in Debian's
Chromium, a console watcher, logging in, opening a chat, and connections and conversations on
the real engine or on a loopback fake Workers AI (made before the browser starts: the ORM
cannot run inside Playwright's sync API, which holds an event loop)."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import LazySettings
from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright, expect, sync_playwright

from playground.accounts.models import Team
from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import KIMI_K26, catalog_seed
from playground.chat.models import Conversation
from playground.chat.services.conversations import conversation_create
from playground.chat.services.turns import chat_turn_start
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_engine_ensure
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.connections import workers_connection_for

CHROMIUM = "/usr/bin/chromium"
PR_SET_PDEATHSIG = 1  # prctl(2)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass(frozen=True)
class LiveApp:
    url: str


class Console:
    """Errors and Content-Security-Policy violations the page reported."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def watch(self, message: ConsoleMessage) -> None:
        if message.type == "error" or "Content Security Policy" in message.text:
            self.problems.append(message.text)


# The Chromium each test process shares, by executable: its process and DevTools address.
_chromiums: dict[str, tuple[subprocess.Popen[bytes], str]] = {}


def _parent_death_signal() -> None:
    """In the child before it runs Chromium: end it when the test process ends, however it ends."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop(process: subprocess.Popen[bytes], profile: str) -> None:
    process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)
    shutil.rmtree(profile, ignore_errors=True)


def _chromium_address(chromium_path: str) -> str:
    """The DevTools address of this test process's Chromium, started at first use (again if it
    died). Launching one per test cost ~0.4 s of CPU and ~0.5 s before the first page."""
    process, address = _chromiums.get(chromium_path, (None, ""))
    if process is not None and process.poll() is None:
        return address
    profile = tempfile.mkdtemp(prefix="playground-test-chromium-")
    process = subprocess.Popen(
        [
            chromium_path,
            *CHROMIUM_ARGS,
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_parent_death_signal,
    )
    atexit.register(_stop, process, profile)
    port_file = Path(profile) / "DevToolsActivePort"  # "<port>\n<path>", written once listening
    deadline = time.monotonic() + 30
    while not (port_file.exists() and "\n" in port_file.read_text()):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{chromium_path} did not start (exit status {process.poll()})")
        time.sleep(0.02)
    address = f"http://127.0.0.1:{port_file.read_text().split()[0]}"
    _chromiums[chromium_path] = (process, address)
    return address


def chromium_connected(playwright: Playwright, chromium_path: str) -> Browser:
    """Headless Chromium for one test: the test process's own, connected over DevTools, started
    at first use. Each test makes contexts of its own (cookies, storage and permissions are a
    context's); `close()` closes the contexts made through it and disconnects."""
    return playwright.chromium.connect_over_cdp(_chromium_address(chromium_path))


@contextmanager
def browser_page(chromium_path: str, *, console: Console | None = None, **options: Any) -> Iterator[Page]:
    """A page in a context of its own in headless Chromium (closed afterwards), watched by
    `console` if given; `options` go to `new_page` (viewport, java_script_enabled, ...)."""
    options.setdefault("viewport", {"width": 1280, "height": 900})
    with sync_playwright() as playwright:
        browser = chromium_connected(playwright, chromium_path)
        try:
            page = browser.new_page(**options)
            if console is not None:
                page.on("console", console.watch)
            yield page
        finally:
            browser.close()


def log_in(page: Page, base_url: str, username: str = "teammate", *, then: str = "/chat/") -> None:
    """Sign in through the real form (the `actors` fixture's passwords are password-<name>),
    landing on `then`."""
    page.goto(base_url + "/login/" + (f"?next={then}" if then != "/chat/" else ""))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(f"password-{username}")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(base_url + then)


def fits_the_width(page: Page) -> None:
    """No sideways scrolling at the page's width, and nothing sticking out of its panel."""
    width = page.viewport_size["width"] if page.viewport_size else 0
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    overflowing = page.evaluate(
        """() => [...document.querySelectorAll('.panel')].filter(panel => {
            const edge = panel.getBoundingClientRect().right;
            return [...panel.querySelectorAll('*')].some(el => el.getBoundingClientRect().right > edge);
        }).map(panel => panel.getAttribute('aria-labelledby'))"""
    )
    assert overflowing == []


def open_chat(page: Page, base_url: str, conversation: Conversation) -> None:
    page.goto(f"{base_url}/chat/{conversation.pk}/")
    chat_ready(page)


def drawer_open(page: Page, panel: str) -> None:
    """Open the chat page's drawer `panel` (a `<details class="drawer-panel">` selector) unless
    it is open already, and wait until its content shows.

    A blind click on the summary is not enough: a swap after a streamed answer may have redrawn
    the panel open (the click then closes it), and under load a click that lands while the page
    is still settling was seen once in CI to leave it closed. So click only when closed, check,
    and try again.
    """
    details = page.locator(panel)
    for _ in range(3):
        if details.get_attribute("open") is None:
            details.locator(":scope > summary").click()
        try:
            expect(details.locator(":scope > .drawer")).to_be_visible(timeout=5_000)
            return
        except AssertionError:
            continue
    expect(details.locator(":scope > .drawer")).to_be_visible()


def chat_ready(page: Page) -> None:
    """Wait until the chat page's scripts have all run, not only htmx.

    The deferred scripts run in order (htmx, its ws extension, layout.js, chat.js, ...) and htmx
    binds its triggers at DOMContentLoaded: typed and sent as soon as `window.htmx` exists, a
    message could meet a page whose Enter key still adds a newline (chat.js not run yet), under
    load (seen once, with both suites side by side).
    """
    page.wait_for_function(
        "() => document.readyState === 'complete' && document.querySelector('[ws-connect]') && window.htmx"
    )


def turn_answered(actors: Actors, conversation: Conversation, question: str) -> None:
    """One real turn of the teammate's through the conversation's connection (before the browser
    starts: the ORM cannot run inside Playwright's sync API)."""
    turn = chat_turn_start(user=actors.teammate, conversation_id=conversation.pk, text=question)

    async def run() -> None:
        async for _ in turn.events():
            pass

    async_to_sync(run)()


def engine_connection(actors: Actors, settings: LazySettings, engine: Any) -> ProviderConnection:
    """The team's connection to the real engine (the catalogue seeded again: a transactional
    test's flush empties it)."""
    settings.ENGINE_URL = engine.url
    settings.ENGINE_API_TOKEN = engine.token
    catalog_seed(CatalogModel, PriceCard)
    return connection_engine_ensure(team=actors.team)


def engine_chat(actors: Actors, settings: LazySettings, engine: Any) -> Conversation:
    """The teammate's conversation with the real engine's model."""
    connection = engine_connection(actors, settings, engine)
    return conversation_create(user=actors.teammate, connection_id=connection.pk, model_id=engine.model_id)


def fake_workers_connection(
    team: Team, upstream: FakeUpstream, *, token: str = "cf-browser-test"
) -> ProviderConnection:
    """A Workers AI connection of `team` that talks to the loopback fake upstream."""
    return workers_connection_for(team, upstream, name="Workers AI (fake)", token=token)


def fake_workers_chat(actors: Actors, upstream: FakeUpstream, model_id: str = KIMI_K26) -> Conversation:
    """The teammate's conversation through a Workers AI connection to the loopback fake."""
    catalog_seed(CatalogModel, PriceCard)
    connection = fake_workers_connection(actors.team, upstream)
    return conversation_create(user=actors.teammate, connection_id=connection.pk, model_id=model_id)
