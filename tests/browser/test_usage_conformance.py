"""In Chromium: the dashboard loads its schema conformance table beside the charts, in their look.
Screenshots go to test-artifacts/ (look at them)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26, catalog_seed
from playground.presets.models import Preset, PresetVersion
from playground.providers.structured_answers import answer_format
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.calls.context import RequestContext
from playground.usage.metering import Outcome
from playground.usage.models import UsageSource, UsageStatus
from playground.usage.records import usage_record_create
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, log_in
from tests.support.clock import clock

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TICKET = {
    "type": "json_schema",
    "json_schema": {
        "name": "support_ticket",
        "schema": {
            "type": "object",
            "properties": {
                "priority": {"enum": ["low", "high"]},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["priority", "tags"],
        },
    },
}
ANSWERS = {  # answer text -> how many times each model gave it
    '{"priority": "high", "tags": ["billing"]}': 7,
    '{"priority": "urgent", "tags": []}': 2,
    '{"priority": "low", "tags": [3]}': 1,
    '{"priority": "low"}': 1,
}


@pytest.fixture
def structured(actors: Actors) -> None:
    catalog_seed(CatalogModel, PriceCard)  # a transactional test's flush empties the catalogue
    preset = Preset.objects.create(team=actors.team, name="Triage")
    version = PresetVersion.objects.create(preset=preset, number=3, model_id=KIMI_K26, setup={})
    at = timezone.now() - dt.timedelta(hours=3)
    asked = [
        (KIMI_K26, TICKET, version.pk),
        (ENGINE_MODEL_ID, TICKET, None),
        (ENGINE_MODEL_ID, {"type": "json_object"}, None),
    ]
    for model_id, response_format, version_id in asked:
        for text, times in ANSWERS.items():
            for _ in range(times):
                context = RequestContext(
                    team_id=actors.team.pk,
                    user_id=actors.owner.pk,
                    connection_id=None,
                    model_id=model_id,
                    preset_version_id=version_id,
                    answer_format=answer_format(response_format),
                )
                outcome = Outcome(
                    status=UsageStatus.OK,
                    usage=NormalizedUsage(prompt_tokens=300, completion_tokens=20),
                    usage_source=UsageSource.PROVIDER,
                    ttft_ms=200,
                    latency_ms=900,
                    answer_text=text,
                )
                with clock(at):
                    usage_record_create(context=context, outcome=outcome)


def test_the_dashboard_shows_schema_conformance_as_a_table(
    live_app: LiveApp, structured: None, chromium_path: str, artifacts: Path
) -> None:
    console = Console()
    with browser_page(chromium_path, console=console, viewport={"width": 1400, "height": 1000}) as page:
        page.on("pageerror", lambda error: console.problems.append(str(error)))
        log_in(page, live_app.url)
        page.goto(f"{live_app.url}/usage/?range=24h")
        rows = page.locator("#conformance tr[data-conformance-row]")
        expect(rows).to_have_count(3, timeout=20_000)
        expect(rows.first).to_contain_text("Triage v3")
        expect(rows.first).to_contain_text("63.6%")
        expect(page.locator("#conformance")).to_contain_text("JSON object")
        page.locator("#conformance").scroll_into_view_if_needed()
        page.locator("#conformance").screenshot(path=str(artifacts / "usage-conformance.png"))
        page.screenshot(path=str(artifacts / "usage-dashboard-conformance.png"), full_page=True)

    assert console.problems == []
