"""An evaluation in a real browser on the real engine: upload a 20-item dataset with one bad line
(refused by its number, the good ones kept on confirming), run two preset versions with two
checks and an LLM judge (on a loopback upstream), watch the results page fill, and check that its
costs, the answers' and the judge's apart, equal the records' sum.

The Celery worker runs in a thread of this process (`celery_worker_thread`); the batches' queue
path talks to the real engine process. Screenshots go to /tmp/shots/evals/.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings
from playwright.sync_api import expect

from playground.catalog.seed import ENGINE_MODEL_ID
from playground.evals.models import DatasetItem, Experiment
from playground.evals.results import experiment_records, experiment_summaries
from playground.presets.services import connection_ref, preset_version_save
from playground.presets.setup import PresetSetup
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.batches import QUEUE_MODEL
from tests.support.browser import Console, LiveApp, browser_page, engine_connection, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ITEMS = 20


def test_a_member_uploads_a_dataset_runs_two_versions_and_reads_the_results(
    live_app: LiveApp,
    running_engine: Any,
    actors: Actors,
    settings: LazySettings,
    chromium_path: str,
    celery_worker_thread: None,
    openai_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
) -> None:
    fake_upstream.default_text = '{"score": 0.8, "reason": "States the sum."}'  # every judge's verdict
    settings.BATCH_POLL_FIRST_SECONDS = 0.5
    settings.BATCH_POLL_MAX_SECONDS = 2.0
    connection = engine_connection(actors, settings, running_engine)
    preset_id = None
    for prompt in ("Answer with one number.", "Answer with a number, then say why."):
        setup = PresetSetup(
            connection=connection_ref(connection),
            model_id=ENGINE_MODEL_ID,
            system_prompt=prompt,
            parameters={"max_tokens": 8, "temperature": 0},
        )
        saved = preset_version_save(
            user=actors.owner, team_id=actors.team.pk, setup=setup, name="Sums", preset_id=preset_id
        )
        preset_id = saved.preset_id
    lines = [json.dumps({"input": f"What is {i} + {i}?", "expected": str(2 * i)}) for i in range(ITEMS)]
    lines.insert(7, '{"input": "eight", "expected": 8, "colour": "red"}')  # line 8: an unknown field
    judge = {
        "kind": "judge",
        "name": "Judge",
        "prompt": "Question: {{input}}\nExpected: {{expected}}\nAnswer: {{output}}\nIs it right?",
        "connection": openai_connection.pk,
        "model": QUEUE_MODEL,
    }
    shots = Path("/tmp/shots/evals")
    shots.mkdir(parents=True, exist_ok=True)
    console = Console()

    with browser_page(chromium_path, console=console, viewport={"width": 1400, "height": 900}) as page:
        log_in(page, live_app.url, then="/evals/")
        expect(page.get_by_text("No datasets yet")).to_be_visible()
        page.get_by_label("Name").fill("Sums")
        page.get_by_role("button", name="Create dataset").click()

        page.get_by_label("JSONL or CSV file").set_input_files(
            {"name": "sums.jsonl", "mimeType": "application/jsonl", "buffer": "\n".join(lines).encode()}
        )
        page.get_by_role("button", name="Upload").click()
        expect(page.locator(".line-errors")).to_contain_text("Line 8: unknown field(s) `colour`")
        page.screenshot(path=shots / "01-bad-line.png", full_page=True)
        page.get_by_role("button", name=f"Keep {ITEMS} good items").click()
        expect(page.locator("#item-table tbody tr")).to_have_count(ITEMS)

        page.get_by_label("Sums v1").check()
        page.get_by_label("Sums v2").check()
        page.get_by_label("Checks (one JSON object a line)").fill(
            '{"kind": "numeric", "tolerance": 0}\n{"kind": "length", "max": 40}\n' + json.dumps(judge)
        )
        page.get_by_role("button", name="Check and estimate").click()
        expect(page.locator("#preflight-total")).to_contain_text("up to $")
        page.screenshot(path=shots / "02-preflight.png", full_page=True)
        page.get_by_role("button", name=f"Run {ITEMS} items on 2 targets").click()

        expect(page.locator("#winner")).to_be_visible(timeout=240_000)
        expect(page.locator("#experiment-running")).to_have_count(0, timeout=240_000)
        page.screenshot(path=shots / "03-results.png", full_page=True)
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.screenshot(path=shots / f"04-results-{width}.png", full_page=True)
        judge_shown = [
            Decimal(cell)
            for cell in page.locator("#summary [data-judge-cost]").evaluate_all(
                "cells => cells.map(cell => cell.dataset.judgeCost)"
            )
        ]
        shown = [
            Decimal(cell)
            for cell in page.locator("#summary td[data-cost]").evaluate_all(
                "cells => cells.map(cell => cell.dataset.cost)"
            )
        ]
        answers = page.locator("#answers tbody tr").count()

    experiment = Experiment.objects.get()
    records = list(experiment_records(experiment=experiment))
    assert len(records) == 2 * ITEMS
    assert DatasetItem.objects.filter(added_in=1).count() == ITEMS
    assert sum(shown, Decimal(0)) == sum((record.total_cost for record in records), Decimal(0)) > 0
    assert [s.cost for s in experiment_summaries(experiment=experiment)] == shown
    # The judge's calls: one record per answer, summed apart as the judge cost, to the last digit.
    judged = UsageRecord.objects.filter(tags__contains=f",experiment-judge:{experiment.pk},")
    assert judged.count() == 2 * ITEMS
    assert sum(judge_shown, Decimal(0)) == sum((record.total_cost for record in judged), Decimal(0)) > 0
    assert [s.check_means[2] for s in experiment_summaries(experiment=experiment)] == [pytest.approx(0.8)] * 2
    assert answers == ITEMS
    assert not [problem for problem in console.problems if "Content Security Policy" in problem], (
        console.problems
    )
