"""In Chromium at 1280 and 390 px: two experiments on one dataset version, run on the real engine,
read side by side (the compare page's figures, deltas and both answers) and an answer's diff
against the expected output on the results page. Screenshots go to /tmp/shots_evalsui/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings
from playwright.sync_api import Page, expect

from playground.catalog.seed import ENGINE_MODEL_ID
from playground.evals.models import Experiment
from playground.evals.results import experiment_summaries
from playground.evals.services.datasets import dataset_create, dataset_item_add
from playground.evals.services.experiments import experiment_create, experiment_start
from playground.evals.uploads import ItemFields
from playground.presets.services import connection_ref, preset_version_save
from playground.presets.setup import PresetSetup
from playground.usage.money import money
from tests.evals.conftest import run_to_the_end
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, engine_connection, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path("/tmp/shots_evalsui")
CHECKS = [{"kind": "contains", "ignore_case": True}, {"kind": "length", "max": 60}]


def _experiments(actors: Actors, settings: LazySettings, engine: Any) -> tuple[Experiment, Experiment]:
    settings.BATCH_POLL_FIRST_SECONDS = 0.2
    settings.BATCH_POLL_MAX_SECONDS = 1.0
    connection = engine_connection(actors, settings, engine)
    preset_id, versions = None, []
    for prompt in ("Answer in one word.", "Answer in a short sentence."):
        setup = PresetSetup(
            connection=connection_ref(connection),
            model_id=ENGINE_MODEL_ID,
            system_prompt=prompt,
            parameters={"max_tokens": 10, "temperature": 0},
        )
        saved = preset_version_save(
            user=actors.owner, team_id=actors.team.pk, setup=setup, name="Capitals", preset_id=preset_id
        )
        preset_id = saved.preset_id
        versions.append(saved)
    dataset = dataset_create(user=actors.owner, team_id=actors.team.pk, name="Capitals")
    for question, answer in (
        ("The capital of France?", "Paris"),
        ("The capital of Italy?", "Rome is the capital"),
    ):
        dataset_item_add(
            user=actors.owner, dataset_id=dataset.pk, fields=ItemFields(input=question, expected=answer)
        )
    runs = []
    for version in versions:
        experiment = experiment_create(
            user=actors.owner, dataset_id=dataset.pk, preset_version_ids=[version.pk], checks=CHECKS
        )
        experiment_start(user=actors.owner, experiment_id=experiment.pk)
        for target in experiment.targets.select_related("batch"):
            assert target.batch is not None
            run_to_the_end(target.batch)
        runs.append(experiment)
    return runs[0], runs[1]


def test_two_experiments_read_side_by_side_with_diffs(
    live_app: LiveApp, running_engine: Any, actors: Actors, settings: LazySettings, chromium_path: str
) -> None:
    first, second = _experiments(actors, settings, running_engine)
    costs = [money(experiment_summaries(experiment=e)[0].cost) for e in (first, second)]
    SHOTS.mkdir(parents=True, exist_ok=True)
    console = Console()
    for width in (1280, 390):
        with browser_page(chromium_path, console=console, viewport={"width": width, "height": 900}) as page:
            log_in(page, live_app.url, then=f"/evals/experiments/{first.pk}/")
            expect(page.locator(".eval-diff").first).to_contain_text("Against expected")
            page.screenshot(path=str(SHOTS / f"results-diff-{width}.png"), full_page=True)
            _no_sideways_scroll(page)

            page.get_by_role("link", name="Compare with another experiment").click()
            page.get_by_label("Compare with (only experiments on Capitals v2)").select_option(str(second.pk))
            page.get_by_role("button", name="Compare").click()
            table = page.locator("#compare-target-1")
            expect(table.locator("tbody tr")).to_have_count(9)  # two check means and seven figures
            cost = table.locator("tr", has_text="Cost").first
            expect(cost.locator("td").nth(0)).to_have_text(costs[0])
            expect(cost.locator("td").nth(1)).to_have_text(costs[1])
            expect(page.locator("#compare-answers tbody tr")).to_have_count(2)
            page.screenshot(path=str(SHOTS / f"compare-{width}.png"), full_page=True)
            _no_sideways_scroll(page)
    assert console.problems == []


def _no_sideways_scroll(page: Page) -> None:
    """The page never scrolls sideways; its wide tables scroll inside their own box (`.table-scroll`),
    which `fits_the_width`'s panel check counts as sticking out."""
    width = page.viewport_size["width"] if page.viewport_size else 0
    assert page.evaluate("document.documentElement.scrollWidth") <= width
