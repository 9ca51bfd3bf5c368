"""What browser tests share: a console watcher, logging in, opening a chat, and conversations
on the real engine or on a loopback fake Workers AI (made before the browser starts: the ORM
cannot run inside Playwright's sync API, which holds an event loop)."""

from __future__ import annotations

from typing import Any

from django.conf import LazySettings
from playwright.sync_api import ConsoleMessage, Page, expect

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import KIMI_K26, catalog_seed
from playground.chat.models import Conversation
from playground.chat.services import conversation_create
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.services import connection_engine_ensure, connection_save
from tests.conftest import Actors
from tests.fakes.upstream import FakeUpstream


class Console:
    """Errors and Content-Security-Policy violations the page reported."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def watch(self, message: ConsoleMessage) -> None:
        if message.type == "error" or "Content Security Policy" in message.text:
            self.problems.append(message.text)


def log_in(page: Page, base_url: str, username: str = "teammate") -> None:
    page.goto(base_url + "/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(f"password-{username}")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(base_url + "/chat/")


def open_chat(page: Page, base_url: str, conversation: Conversation) -> None:
    page.goto(f"{base_url}/chat/{conversation.pk}/")
    page.wait_for_function("() => document.querySelector('[ws-connect]') && window.htmx")


def engine_chat(actors: Actors, settings: LazySettings, engine: Any) -> Conversation:
    """The teammate's conversation with the real engine's model."""
    settings.ENGINE_URL = engine.url
    settings.ENGINE_API_TOKEN = engine.token
    catalog_seed(CatalogModel, PriceCard)  # a transactional test's flush empties the catalogue
    connection = connection_engine_ensure(team=actors.team)
    return conversation_create(user=actors.teammate, connection_id=connection.pk, model_id=engine.model_id)


def fake_workers_chat(actors: Actors, upstream: FakeUpstream, model_id: str = KIMI_K26) -> Conversation:
    """The teammate's conversation through a Workers AI connection to the loopback fake."""
    catalog_seed(CatalogModel, PriceCard)
    connection = connection_save(
        connection=ProviderConnection(
            team=actors.team,
            name="Workers AI (fake)",
            kind=ConnectionKind.WORKERS_AI,
            base_url=upstream.workers_base_url,
            account_id="0" * 32,
        ),
        token="cf-browser-test",
    )
    return conversation_create(user=actors.teammate, connection_id=connection.pk, model_id=model_id)
