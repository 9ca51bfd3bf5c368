"""In Chromium at 1280 and 390 px: an owner erases an end user from the team's Data page, seeing
what would change counted first, then confirming. Screenshots go to
test-artifacts/erasure-*.png (look at them: a clipped table or button is a failure)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from playground.catalog.seed import ENGINE_MODEL_ID
from playground.chat.models import Conversation, Message, MessageRole
from playground.providers.events import Finish, TextDelta
from playground.usage.calls.context import Attribution, RequestContext
from playground.usage.metering import UsageMeter
from playground.usage.models import RequestPath, UsageRecord
from playground.usage.records import usage_record_create
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, fits_the_width, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ANA = "cust-4711-ana"


def _gateway_record(actors: Actors, end_user: str) -> UsageRecord:
    meter = UsageMeter(prompt_chars=200)
    meter.observe(TextDelta("Your order ships today."))
    meter.observe(Finish("stop"))
    context = RequestContext(
        team_id=actors.team.pk,
        user_id=None,
        connection_id=None,
        model_id=ENGINE_MODEL_ID,
        path=RequestPath.GATEWAY,
        request_body={"messages": [{"role": "user", "content": "Where is my order?"}]},
        attribution=Attribution(end_user=end_user),
    )
    return usage_record_create(context=context, outcome=meter.outcome())


@pytest.mark.parametrize("width", [1280, 390])
def test_an_owner_counts_then_erases_an_end_user(
    live_app: LiveApp, actors: Actors, chromium_path: str, artifacts: Path, width: int
) -> None:
    erased = [_gateway_record(actors, ANA) for _ in range(3)]
    kept = _gateway_record(actors, "cust-9000-bo")
    conversation = Conversation.objects.create(team=actors.team, user=actors.owner, model_id=ENGINE_MODEL_ID)
    Message.objects.create(conversation=conversation, role=MessageRole.USER, content=f"Refund for {ANA}?")
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": width, "height": 900}) as page:
        log_in(page, live_app.url, "owner")
        page.goto(f"{live_app.url}/teams/{actors.team.pk}/data/")
        panel = page.locator("section", has=page.get_by_role("heading", name="Erase an end user"))
        panel.get_by_label("End user").fill(ANA)
        panel.get_by_role("button", name="Count what would be erased").click()

        expect(page.get_by_role("heading", name=f"Erase end user {ANA}?")).to_be_visible()
        counts = page.locator(".erase-counts tbody tr")
        expect(counts).to_have_text(
            [
                "request records of this end user: their text removed, the id replaced by a tombstone3",
                "hourly and daily cost rows by end user (renamed to the tombstone)2",
                "chat messages1",
            ]
        )
        confirm = page.get_by_role("button", name="Erase from 6 places")
        expect(confirm).to_be_visible()
        fits_the_width(page)
        page.screenshot(path=str(artifacts / f"erasure-confirm-{width}.png"), full_page=True)

        confirm.click()
        expect(page.get_by_text("End user erased: 6 places changed; costs and tokens kept.")).to_be_visible()
        page.screenshot(path=str(artifacts / f"erasure-done-{width}.png"), full_page=True)
    assert console.problems == []
    assert {record.end_user for record in UsageRecord.objects.filter(pk__in=[r.pk for r in erased])} != {ANA}
    assert UsageRecord.objects.get(pk=kept.pk).end_user == "cust-9000-bo"
