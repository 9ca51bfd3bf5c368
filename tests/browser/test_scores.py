"""In Chromium at 1280 px: a person scores a request on its page (a rating, then changed to a
thumb down, with a comment), the request log finds it by that score and shows its badge, and the
dashboard charts the mean rating and thumbs-up share of two preset versions, the figures those
of the stored scores. Screenshots: test-artifacts/scores-record.png, scores-dashboard.png (look
at them)."""

from __future__ import annotations

import datetime as dt
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, catalog_seed
from playground.presets.models import Preset, PresetVersion
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.api_keys import api_key_issue
from playground.usage.calls.context import RequestContext
from playground.usage.metering import Outcome
from playground.usage.models import Score, ScoreKind, UsageRecord, UsageSource, UsageStatus
from playground.usage.records import usage_record_create
from playground.usage.scores import ScoreInput, score_put_by_key, score_put_by_person
from tests.support.actors import Actors
from tests.support.browser import Console, LiveApp, browser_page, log_in
from tests.support.clock import clock

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def scored(actors: Actors) -> UsageRecord:
    """Forty requests of the last day, sent by "Support triage" v1 and v2, most of them scored by
    people and by the app's key (v2 better); returns one of v2's requests, not scored yet."""
    catalog_seed(CatalogModel, PriceCard)
    rng = random.Random(39)
    preset = Preset.objects.create(team=actors.team, name="Support triage")
    versions = [
        PresetVersion.objects.create(preset=preset, number=n, model_id=ENGINE_MODEL_ID, setup={"n": n})
        for n in (1, 2)
    ]
    key, _ = api_key_issue(
        team_id=actors.team.pk, name="helpdesk-app", connection_id=None, created_by_id=None
    )
    now = timezone.now()
    records = []
    for i in range(40):
        version = versions[i % 2]
        context = RequestContext(
            team_id=actors.team.pk,
            user_id=actors.owner.pk,
            connection_id=None,
            model_id=ENGINE_MODEL_ID,
            preset_version_id=version.pk,
        )
        outcome = Outcome(
            status=UsageStatus.OK,
            usage=NormalizedUsage(
                prompt_tokens=rng.randint(300, 3000), completion_tokens=rng.randint(20, 400)
            ),
            usage_source=UsageSource.PROVIDER,
            ttft_ms=rng.randint(100, 900),
            latency_ms=rng.randint(900, 4000),
        )
        with clock(now - dt.timedelta(minutes=10 + 20 * i)):
            records.append(usage_record_create(context=context, outcome=outcome))
    for i, record in enumerate(records[2:], start=2):
        better = i % 2  # v2's
        rating = min(5, max(1, round(rng.gauss(4.1 if better else 2.9, 0.8))))
        score_put_by_person(
            user_id=actors.owner.pk, record=record, given=ScoreInput(ScoreKind.RATING, rating, "")
        )
        if i % 3:
            thumb = int(rng.random() < (0.8 if better else 0.45))
            score_put_by_key(
                key=key,
                request_id=str(record.request_id),
                given=ScoreInput(ScoreKind.THUMBS, thumb, "", "user_feedback"),
            )
    return records[1]


def _figure(page: Any) -> dict[str, Any]:
    page.wait_for_function(
        "() => { const p = document.querySelector('#chart-scores-by-preset-version .plot');"
        " return p && p.layout; }",
        timeout=20_000,
    )
    figure: dict[str, Any] = page.evaluate(
        """() => { const p = document.querySelector('#chart-scores-by-preset-version .plot');
            return {ticks: p.layout.yaxis.ticktext, rating: p.data[0].x, up: p.data[1].x}; }"""
    )
    return figure


def test_a_person_scores_a_request_the_log_finds_it_and_the_dashboard_charts_the_versions(
    live_app: LiveApp, scored: UsageRecord, chromium_path: str, artifacts: Path
) -> None:
    console = Console()
    record_url = f"{live_app.url}/usage/log/{scored.request_id}/"
    with browser_page(chromium_path, console=console, viewport={"width": 1280, "height": 900}) as page:
        page.on("pageerror", lambda error: console.problems.append(str(error)))
        log_in(page, live_app.url, "teammate")
        page.goto(record_url)
        scores = page.locator("#scores")
        expect(scores).to_contain_text("No scores yet")
        scores.get_by_text("4 ★", exact=True).click()
        scores.get_by_label("Comment").fill("Right queue, but it missed the refund.")
        scores.get_by_role("button", name="Save score").click()
        expect(scores.locator(".score-item")).to_have_count(1)
        expect(scores).to_contain_text("4/5 ★")
        expect(scores).to_contain_text("teammate (you)")
        expect(scores.get_by_role("button", name="Change my score")).to_be_visible()

        # Changed in place: a thumb down now, the comment kept as typed.
        scores.get_by_text("▼ Thumbs down", exact=True).click()
        scores.get_by_role("button", name="Change my score").click()
        expect(scores.locator(".score-badge")).to_have_text("▼ Thumbs down")
        expect(scores).to_contain_text("Right queue, but it missed the refund.")
        expect(scores.locator("#score-down")).to_be_checked()
        page.evaluate("() => window.scrollTo(0, 0)")  # the sticky top bar, at the top of a full page
        page.screenshot(path=str(artifacts / "scores-record.png"), full_page=True)

        page.goto(f"{live_app.url}/usage/log/?range=24h")
        page.locator("select[name=score]").select_option(label="Thumbs down")  # applied at once
        expect(page).to_have_url(re.compile(r"score=down"))
        rows = page.locator(".log-table tbody:not(.log-totals) tr")
        expect(rows.first).to_be_visible(timeout=20_000)
        shown_down = rows.count()
        expect(page.locator(f'a.score-badge[href$="{scored.request_id}/#scores"]')).to_have_text("▼1")

        page.goto(f"{live_app.url}/usage/?range=24h")
        figure = _figure(page)
        chart = page.locator("#chart-scores-by-preset-version")
        chart.scroll_into_view_if_needed()
        chart.screenshot(path=str(artifacts / "scores-dashboard.png"))
    assert console.problems == []

    # The chart's and the log's figures are the stored scores'.
    stored: dict[int, list[Score]] = defaultdict(list)
    for score in Score.objects.filter(team=scored.team_id).select_related("record"):
        assert score.record.preset_version_id is not None
        stored[score.record.preset_version_id].append(score)
    labels = {v.pk: f"Support triage v{v.number}" for v in PresetVersion.objects.all()}
    order = sorted(stored, key=lambda pk: (-len(stored[pk]), pk))[::-1]  # plotly: last on top
    assert figure["ticks"] == [labels[pk] for pk in order]

    def mean(values: list[int]) -> float:
        return sum(values) / len(values)

    ratings = [mean([s.value for s in stored[pk] if s.kind == ScoreKind.RATING]) for pk in order]
    ups = [mean([s.value for s in stored[pk] if s.kind == ScoreKind.THUMBS]) for pk in order]
    assert figure["rating"] == pytest.approx(ratings, abs=1e-12)
    assert figure["up"] == pytest.approx(ups, abs=1e-12)
    downs = Score.objects.filter(kind=ScoreKind.THUMBS, value=0).values("record").distinct().count()
    assert shown_down == downs
