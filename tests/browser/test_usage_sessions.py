"""In Chromium: the chat's runway under the composer (warned when few turns are left), and the
dashboard's session sections (hit ratio chart and tables, sessions closest to their window).
Screenshots go to test-artifacts/ (look at them)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from playground.catalog.seed import KIMI_K26
from playground.chat.models import Conversation
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.calls.context import Attribution, RequestContext
from playground.usage.metering import Outcome
from playground.usage.models import RequestPath, UsageSource, UsageStatus
from playground.usage.records import usage_record_create
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, fake_workers_chat, log_in, open_chat
from tests.support.clock import clock

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def sent(actors: Actors, at: dt.datetime, prompt: int, cached: int, **context: Any) -> None:
    outcome = Outcome(
        status=UsageStatus.OK,
        usage=NormalizedUsage(prompt_tokens=prompt, completion_tokens=400, cached_tokens=cached),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=200,
        latency_ms=900,
    )
    request = RequestContext(
        team_id=actors.team.pk, user_id=actors.teammate.pk, connection_id=None, model_id=KIMI_K26, **context
    )
    with clock(at):
        usage_record_create(context=request, outcome=outcome)


@pytest.fixture
def near_limit(actors: Actors, fake_upstream: FakeUpstream) -> Conversation:
    """A conversation eight turns from Kimi K2.6's window, and a gateway session that keeps missing."""
    conversation = fake_workers_chat(actors, fake_upstream)
    start = timezone.now() - dt.timedelta(hours=2)
    for turn, prompt in enumerate(range(230_000, 250_000, 4_000)):
        sent(
            actors, start + dt.timedelta(minutes=turn), prompt, prompt - 5000, conversation_id=conversation.pk
        )
    gateway = {
        "path": RequestPath.GATEWAY,
        "affinity_key": "agent-7",
        "attribution": Attribution(session="job-42"),
    }
    for turn, (prompt, cached) in enumerate([(20_000, 0), (24_000, 0), (28_000, 2000), (32_000, 28_000)]):
        sent(actors, start + dt.timedelta(minutes=30 + turn), prompt, cached, **gateway)
    return conversation


def test_the_runway_shows_under_the_composer_and_on_the_dashboard(
    live_app: LiveApp, near_limit: Conversation, chromium_path: str, artifacts: Path
) -> None:
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": 1400, "height": 1000}) as page:
        page.on("pageerror", lambda error: console.problems.append(str(error)))
        log_in(page, live_app.url)
        open_chat(page, live_app.url, near_limit)
        runway = page.locator("#runway")
        expect(runway).to_have_class("runway is-few")
        expect(runway).to_contain_text("turns left before the 256k context window")
        page.locator("#composer").screenshot(path=str(artifacts / "chat-runway.png"))

        page.goto(f"{live_app.url}/usage/?range=24h")
        expect(page.locator("#hit-ratio-sessions tbody tr")).to_have_count(2, timeout=20_000)
        expect(page.locator("#hit-ratio .main-svg").first).to_be_visible()
        expect(page.locator("#runway tbody tr").first).to_contain_text(near_limit.title or "Conversation")
        page.locator("#hit-ratio").scroll_into_view_if_needed()
        page.locator("#hit-ratio").screenshot(path=str(artifacts / "usage-hit-ratio.png"))
        page.locator("#runway").screenshot(path=str(artifacts / "usage-runway.png"))

    assert console.problems == []
