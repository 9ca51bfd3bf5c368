"""Pages that keep their promises (issue 36), in Chromium at 1280 px against loopback fakes: an
OpenAI-compatible connection offers the models its test found and preselects none untested
(point 2); a batch's model id is checked against the connection at the preview (point 4); the
pre-flight says whose turns its "expected" comes from (point 7); the record page and the log name
the preset version and the variables that sent a request (point 9); the cache-break note names
every cause its chart stacks and "unpriced" counts only requests that ran (point 10).
One 390 px screenshot per test goes to `test-artifacts/promises-*.png`."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, ViewportSize, expect

from playground.batches.models import Batch
from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import KIMI_K26, catalog_seed
from playground.chat.models import Conversation
from playground.chat.services.preset_setups import conversation_from_preset, conversation_preset_save
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_models_store
from playground.usage.calls.context import RequestContext
from playground.usage.models import UsageRecord, UsageStatus
from tests.browser.test_branches import send
from tests.fakes.upstream import FakeUpstream, json_reply
from tests.support.actors import Actors
from tests.support.analytics import record_write
from tests.support.batches import NO_QUEUE_MODEL, jsonl, prompts
from tests.support.browser import (
    Console,
    LiveApp,
    browser_page,
    drawer_open,
    fake_workers_chat,
    log_in,
    open_chat,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
TIMEOUT_MS = 30_000
REFUSED_FORM = "Failed to load resource: the server responded with a status of 400 (Bad Request)"


def phone_shot(page: Page, path: Path, *, part: str = "") -> None:
    """The page (or its `part`, a selector) as a phone shows it once laid out again (charts redraw
    on resize), then back to the desktop width."""
    page.set_viewport_size(PHONE)
    page.wait_for_function(f"() => document.documentElement.scrollWidth <= {PHONE['width']}")
    if part:
        page.locator(part).screenshot(path=path)
    else:
        page.screenshot(path=path, full_page=True)
    page.set_viewport_size(DESKTOP)


def test_an_openai_compatible_connection_offers_the_models_its_test_found(
    live_app: LiveApp,
    actors: Actors,
    openai_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    chromium_path: str,
    artifacts: Path,
) -> None:
    """Point 2: before its test nothing is preselected (the endpoint may serve none of the
    catalogue); after, the form and the Model drawer offer exactly what the test listed."""
    fake_upstream.script(json_reply({"object": "list", "data": [{"id": "served/a"}, {"id": KIMI_K26}]}))
    gateway = str(openai_connection.pk)
    console = Console()

    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        log_in(page, live_app.url, username="owner")
        picker = page.locator("#model-field #id_model_id")
        page.locator("#id_connection").select_option(gateway)
        expect(picker.locator("option:checked")).to_have_text(
            "Choose a catalogued model, or type its id below"
        )
        expect(picker).to_have_value("")

        page.goto(f"{live_app.url}/teams/{actors.team.pk}/connections/")
        page.locator(f"#connection-{gateway}").get_by_role("button", name="Test connection").click()
        expect(page.locator("#test-result")).to_contain_text("Connected")

        page.goto(live_app.url + "/chat/")
        page.locator("#id_connection").select_option(gateway)
        # Exactly what the test listed (as the catalogue names them), not the catalogue.
        expect(picker.locator("option")).to_have_text(["Kimi K2.6", "served/a"])
        chosen = picker.input_value()
        phone_shot(page, artifacts / "promises-models-form-390.png")
        page.get_by_role("button", name="Start conversation").click()
        expect(page).to_have_url(re.compile(r"/chat/\d+/$"))

        drawer_open(page, "#model-drawer")
        drawer_picker = page.locator("#model-drawer #id_model_id")
        expect(drawer_picker.locator("option")).to_have_text(["Kimi K2.6", "served/a"])
        expect(drawer_picker).to_have_value(chosen)

    assert [request.path for request in fake_upstream.requests] == ["/v1/models"]
    assert chosen in {KIMI_K26, "served/a"}  # one it serves
    assert Conversation.objects.get().model_id == chosen
    assert console.problems == []


def test_a_batch_on_a_model_the_connection_does_not_serve_is_refused_at_the_preview(
    live_app: LiveApp,
    actors: Actors,
    openai_connection: ProviderConnection,
    chromium_path: str,
    artifacts: Path,
) -> None:
    """Point 4: refused before Confirm, naming the model, not item by item after it."""
    connection_models_store(connection=openai_connection, models=["served/a", "served/b"])
    console = Console()

    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        log_in(page, live_app.url, then="/batches/")
        page.get_by_label("Connection").select_option(str(openai_connection.pk))
        page.get_by_label("Model").fill("served/z")
        page.get_by_label("Paste").fill(jsonl(prompts(2)))
        page.get_by_role("button", name="Check and preview").click()
        expect(page.get_by_text("does not serve served/z")).to_be_visible()
        expect(page.get_by_role("button", name=re.compile("Confirm"))).to_have_count(0)
        phone_shot(page, artifacts / "promises-batch-model-390.png")

        page.get_by_label("Model").fill("served/a")
        page.get_by_label("Paste").fill(jsonl(prompts(2)))
        page.get_by_role("button", name="Check and preview").click()
        expect(page.get_by_role("button", name="Confirm and run 2 items")).to_be_visible()

    assert Batch.objects.get().model_id == "served/a"  # the draft; nothing of served/z
    assert console.problems == [REFUSED_FORM]


def test_the_preflight_says_whose_turns_its_expected_cost_comes_from(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    """Point 7: a first turn is expected from the team's recent turns on the model, an answered
    conversation from its own, and the line says which."""
    conversation = fake_workers_chat(actors, fake_upstream)
    earlier = Conversation.objects.create(team=actors.team, user=actors.owner, model_id=KIMI_K26)
    for prompt, cached, completion in ((1000, 800, 40), (3000, 2200, 80)):
        UsageRecord.objects.create(
            team_id=actors.team.pk,
            model_id=KIMI_K26,
            conversation_id=earlier.pk,
            status=UsageStatus.OK,
            prompt_tokens=prompt,
            cached_tokens=cached,
            completion_tokens=completion,
        )
    console = Console()

    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        log_in(page, live_app.url)
        open_chat(page, live_app.url, conversation)
        page.get_by_label("Message", exact=True).fill("Summarise the plan in three bullet points.")
        basis = page.locator("#preflight-basis")
        expect(basis).to_contain_text("75% cached, ~60 out in the team's 2 recent turns", timeout=TIMEOUT_MS)
        expect(basis).to_have_attribute(
            "title", re.compile(r"\(this conversation has no answered turn yet\)")
        )
        expect(page.locator("#preflight-expected")).to_contain_text("expected $")
        page.set_viewport_size(PHONE)  # a phone shows what the figure is based on whole, not cut
        expect(basis).to_be_visible()
        assert basis.evaluate("e => e.scrollWidth <= e.clientWidth && e.offsetWidth > 0")
        phone_shot(page, artifacts / "promises-preflight-team-390.png")

        send(page, "Hello there")
        page.get_by_label("Message", exact=True).fill("And now?")
        expect(basis).to_contain_text("in 1 answered turn so far", timeout=TIMEOUT_MS)
        expect(basis).not_to_contain_text("the team's")
        expect(basis).to_have_attribute("title", re.compile(r"as this conversation's 1 answered turn so far"))

    assert console.problems == []


def test_the_record_page_and_the_log_name_the_preset_version_and_variables_that_sent_a_request(
    live_app: LiveApp, actors: Actors, fake_upstream: FakeUpstream, chromium_path: str, artifacts: Path
) -> None:
    """Point 9: a turn sent from a conversation started from preset v1 is named on its record
    page (linked to the version) and badged in the log, with the variables it was sent with."""
    source = fake_workers_chat(actors, fake_upstream, model_id=NO_QUEUE_MODEL)
    Conversation.objects.filter(pk=source.pk).update(
        system_prompt="You write to {{customer}}.",
        variables=[{"name": "customer", "type": "text", "value": "Ada"}],
    )
    version = conversation_preset_save(
        user=actors.teammate, conversation_id=source.pk, preset_id=None, name="Letters"
    )
    started = conversation_from_preset(user=actors.teammate, version_id=version.pk)
    console = Console()

    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        log_in(page, live_app.url)
        open_chat(page, live_app.url, started)
        send(page, "Greet {{customer}}.")
    assert fake_upstream.requests[-1].json["messages"][0]["content"] == "You write to Ada."
    record = UsageRecord.objects.get(conversation_id=started.pk)

    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        log_in(page, live_app.url, then=f"/usage/log/{record.request_id}/")
        preset = page.locator("#record-preset")
        expect(preset).to_have_text("Letters v1")
        expect(preset.get_by_role("link")).to_have_attribute(
            "href", f"/presets/{version.preset_id}/#version-1"
        )
        expect(page.locator("#record-variables")).to_contain_text("customer")
        expect(page.locator("#record-variables")).to_contain_text("Ada")
        phone_shot(page, artifacts / "promises-record-preset-390.png")

        page.goto(live_app.url + "/usage/log/")
        row = page.locator(".log-table tbody tr", has=page.locator(".log-preset"))
        expect(row).to_have_count(1)
        expect(row.locator(".log-preset")).to_have_text("Letters v1")
        expect(row.locator(".log-variables")).to_have_text("customer=Ada")
        expect(row.locator("td").first.get_by_role("link")).to_have_attribute(
            "href", f"/usage/log/{record.request_id}/"
        )

    assert record.preset_version_id == version.pk
    assert console.problems == []


def _session(actors: Actors, key: str, bodies: list[dict[str, Any]], *, at: dt.datetime) -> None:
    """One session's requests a minute apart, each after the first finding 3 tokens cached."""
    for turn, body in enumerate(bodies):
        context = RequestContext(
            team_id=actors.team.pk,
            user_id=actors.owner.pk,
            connection_id=None,
            model_id=KIMI_K26,
            affinity_key=key,
            request_body={"model": KIMI_K26, **body},
        )
        record_write(
            at + dt.timedelta(minutes=turn),
            context,
            prompt=400 + 60 * turn,
            cached=3 if turn else 0,
            out=5,
            ttft=100,
            latency=300,
        )


def test_the_cache_break_note_names_every_cause_and_unpriced_counts_only_requests_that_ran(
    live_app: LiveApp, actors: Actors, chromium_path: str, artifacts: Path
) -> None:
    """Point 10: two sessions break for two causes, both named in the note; of two requests to
    a model no card prices, the refused one is not 'unpriced' (it cost nothing)."""
    catalog_seed(CatalogModel, PriceCard)  # a transactional test's flush empties the catalogue
    at = timezone.now() - dt.timedelta(hours=2)
    question = {"role": "user", "content": "Where is order 7?"}
    later = [
        question,
        {"role": "assistant", "content": "Shipped."},
        {"role": "user", "content": "Refund it."},
    ]
    tools = [{"type": "function", "function": {"name": name}} for name in ("lookup_order", "refund")]
    _session(
        actors,
        "tools",
        [{"messages": [question], "tools": tools}, {"messages": later, "tools": tools[::-1]}],
        at=at,
    )
    _session(
        actors,
        "system",
        [
            {"messages": [{"role": "system", "content": "Be brief."}, question]},
            {"messages": [{"role": "system", "content": "Be thorough."}, *later]},
        ],
        at=at,
    )
    for status in (UsageStatus.OK, UsageStatus.REJECTED):
        context = RequestContext(
            team_id=actors.team.pk, user_id=actors.owner.pk, connection_id=None, model_id="x/unpriced"
        )
        record_write(at, context, prompt=100, cached=None, out=10, ttft=300, latency=900, status=status)
    console = Console()

    with browser_page(chromium_path, console=console, viewport=DESKTOP) as page:
        log_in(page, live_app.url, then="/usage/?range=24h")
        expect(page.locator('#headline [data-stat="spend"]')).to_contain_text(
            "1 unpriced request not in it", timeout=TIMEOUT_MS
        )
        expect(page.locator('#headline [data-stat="requests"] .stat-value')).to_have_text("6")
        chart = page.locator("#chart-cache-breaks")
        expect(chart.locator(".plot .plot-container")).to_have_count(1, timeout=TIMEOUT_MS)
        page.wait_for_function(
            "() => document.querySelector('#chart-cache-breaks .plot')?.data?.length === 2"
        )
        shown: list[str] = page.evaluate(
            "() => document.querySelector('#chart-cache-breaks .plot').data.map(trace => trace.name)"
        )
        note = chart.locator(".chart-note").inner_text()
        phone_shot(page, artifacts / "promises-cache-breaks-390.png", part="#chart-cache-breaks")

    assert sorted(shown) == ["System prompt changed", "Tools changed"], json.dumps(shown)
    assert note.startswith("2 breaks lost $"), note
    for cause in shown:
        assert re.search(rf"{cause.lower()} \$[\d.]+ \(1\)", note), (cause, note)
    assert console.problems == []
