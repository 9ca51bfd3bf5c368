"""In Chromium at 1280 and 390 px: an experiment of a preset version and a connection target (the
engine's model with a temperature, max tokens and a system prompt of its own) picked on the
dataset's form, run on the real engine, its results page read: each target's cost equals its
records' sum. Screenshots of the form and the results go to /tmp/shots_evtargets/."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings
from playwright.sync_api import expect

from playground.catalog.seed import ENGINE_MODEL_ID
from playground.evals.models import Dataset, Experiment, TargetKind
from playground.evals.results import experiment_records
from playground.evals.services.datasets import dataset_create, dataset_item_add
from playground.evals.uploads import ItemFields
from playground.presets.services import connection_ref, preset_version_save
from playground.presets.setup import PresetSetup
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord
from tests.evals.conftest import run_to_the_end
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, engine_connection, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path("/tmp/shots_evtargets")


def _setup(actors: Actors, settings: LazySettings, engine: Any) -> tuple[ProviderConnection, Dataset]:
    settings.BATCH_POLL_FIRST_SECONDS = 0.2
    settings.BATCH_POLL_MAX_SECONDS = 1.0
    connection = engine_connection(actors, settings, engine)
    setup = PresetSetup(
        connection=connection_ref(connection),
        model_id=ENGINE_MODEL_ID,
        system_prompt="Answer in one word.",
        parameters={"max_tokens": 8, "temperature": 0},
    )
    preset_version_save(user=actors.owner, team_id=actors.team.pk, setup=setup, name="Capitals")
    dataset = dataset_create(user=actors.owner, team_id=actors.team.pk, name="Capitals")
    for question, answer in (("The capital of France?", "Paris"), ("The capital of Italy?", "Rome")):
        fields = ItemFields(input=question, expected=answer, variables={"style": "terse"})
        dataset_item_add(user=actors.owner, dataset_id=dataset.pk, fields=fields)
    return connection, dataset


def test_a_connection_target_is_picked_on_the_form_run_and_read(
    live_app: LiveApp, running_engine: Any, actors: Actors, settings: LazySettings, chromium_path: str
) -> None:
    connection, dataset = _setup(actors, settings, running_engine)
    label = f"{ENGINE_MODEL_ID.rsplit('/', 1)[-1]} @ {connection.name}, t=0, max 8 tokens"
    SHOTS.mkdir(parents=True, exist_ok=True)
    console = Console()
    # The ORM is used between browser sessions: Playwright's sync API runs an event loop.
    with browser_page(chromium_path, console=console) as page:
        log_in(page, live_app.url, then=f"/evals/datasets/{dataset.pk}/")
        page.get_by_label("Capitals v1").check()
        slot = page.locator("#connection-targets fieldset").first
        slot.get_by_label("Connection and model").select_option(f"{connection.pk}:{ENGINE_MODEL_ID}")
        slot.get_by_label("Temperature").fill("0")
        slot.get_by_label("Max tokens").fill("8")
        slot.get_by_label("System prompt (optional)").fill("Be {{style}}: answer with the city only.")
        page.locator("#id_checks").fill('{"kind": "contains", "ignore_case": true}')
        page.screenshot(path=str(SHOTS / "form-1280.png"), full_page=True)
        page.get_by_role("button", name="Check and estimate").click()
        expect(page.locator("#preflight")).to_contain_text(label)
        page.screenshot(path=str(SHOTS / "preflight-1280.png"), full_page=True)
        page.get_by_role("button", name="Run 2 items on 2 targets").click()
        expect(page.locator("#summary")).to_contain_text(label)

    experiment = Experiment.objects.get()
    targets = list(experiment.targets.select_related("batch"))
    assert [(t.kind, t.label) for t in targets] == [
        (TargetKind.PRESET_VERSION, "Capitals v1"),
        (TargetKind.CONNECTION, label),
    ]
    totals = {}
    for target in targets:
        assert target.batch is not None
        run_to_the_end(target.batch)
        own = UsageRecord.objects.filter(tags__contains=f",eval-target:{target.pk},")
        assert own.count() == 2
        totals[target.label] = sum((record.total_cost for record in own), Decimal(0))
    assert all(total > 0 for total in totals.values())
    assert experiment_records(experiment=experiment).count() == 4

    for width in (1280, 390):
        with browser_page(chromium_path, console=console, viewport={"width": width, "height": 900}) as page:
            log_in(page, live_app.url, then=f"/evals/experiments/{experiment.pk}/")
            summary = page.locator("#summary")
            expect(summary).to_contain_text("system prompt: Be {{style}}")
            for name, total in totals.items():  # each target's cost on the page is its records' sum
                row = summary.locator("tbody tr", has_text=name)
                assert Decimal(row.locator("[data-cost]").get_attribute("data-cost") or "") == total
            page.screenshot(path=str(SHOTS / f"results-{width}.png"), full_page=True)
            assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scroll
            page.goto(f"{live_app.url}/evals/datasets/{dataset.pk}/")
            expect(page.locator("#connection-targets")).to_be_visible()
            if width == 390:
                page.screenshot(path=str(SHOTS / "form-390.png"), full_page=True)
            assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert console.problems == []
