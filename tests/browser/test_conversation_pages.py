"""The conversation list in a real browser with more conversations than one page holds.

Logging in lands on the newest 50; "Older conversations" walks back a page at a time and
"Newest" returns to the first. Screenshots go to `test-artifacts/`.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from playground.chat.models import Conversation
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import LiveApp, browser_page, log_in
from tests.support.connections import workers_connection_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MODELS = ["@cf/moonshotai/kimi-k2.6", "@cf/meta/llama-4-scout-17b-16e-instruct", "@cf/openai/gpt-oss-120b"]


def test_the_list_pages_through_older_conversations_and_back_to_the_newest(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    connection = workers_connection_for(actors.team, fake_upstream, name="Workers AI", token="cf-x")
    made = Conversation.objects.bulk_create(
        Conversation(
            team=actors.team,
            user=actors.owner,
            connection=connection,
            model_id=MODELS[i % len(MODELS)],
            title=f"Support ticket #{1000 + i}: summarise the customer's thread",
        )
        for i in range(120)
    )
    now = timezone.now()
    for i, conversation in enumerate(made):  # ticket 1119 the newest, 1000 the oldest
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now - dt.timedelta(minutes=120 - i))

    with browser_page(chromium_path, viewport={"width": 1280, "height": 900}) as page:
        log_in(page, live_app.url, "teammate")
        cards = page.locator(".conversation-card")
        expect(cards).to_have_count(50)
        expect(cards.first).to_contain_text("Support ticket #1119")
        expect(cards.last).to_contain_text("Support ticket #1070")
        expect(page.get_by_text("120 in your teams")).to_be_visible()
        expect(page.get_by_role("link", name="← Newest")).to_have_count(0)
        page.screenshot(path=artifacts / "conversation-list-page-1.png", full_page=True)

        page.get_by_role("link", name="Older conversations →").click()
        expect(cards.first).to_contain_text("Support ticket #1069")
        expect(cards).to_have_count(50)
        page.get_by_role("link", name="Older conversations →").click()
        expect(cards).to_have_count(20)
        expect(cards.last).to_contain_text("Support ticket #1000")
        expect(page.get_by_role("link", name="Older conversations →")).to_have_count(0)
        expect(page.get_by_text("End of your teams' conversations.")).to_be_visible()
        page.screenshot(path=artifacts / "conversation-list-page-3.png", full_page=True)

        page.get_by_role("link", name="← Newest").click()
        expect(page).to_have_url(live_app.url + "/chat/")
        expect(cards.first).to_contain_text("Support ticket #1119")
