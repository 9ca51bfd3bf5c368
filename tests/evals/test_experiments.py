"""Experiments on the embedded engine: two preset versions over one dataset, run as batches, the
results equal to the usage records; resumed after a chain dies with nothing counted twice;
refused by the budget before anything is sent; cancelled keeping what was answered."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from playground.batches.models import Batch, BatchItem, BatchStatus, ItemState
from playground.batches.services.step import batch_step_run
from playground.evals.models import Dataset, Experiment
from playground.evals.results import experiment_records, experiment_rows, experiment_summaries, winner_line
from playground.evals.services.datasets import dataset_create, dataset_item_add
from playground.evals.services.experiments import (
    ExperimentNotFound,
    experiment_cancel,
    experiment_create,
    experiment_nudge,
    experiment_start,
)
from playground.evals.uploads import ItemFields
from playground.presets.models import PresetVersion
from playground.usage.models import TeamBudget, UsageRecord
from tests.evals.conftest import QUESTIONS, run_to_the_end
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db

CHECKS = [{"kind": "contains", "ignore_case": True}, {"kind": "length", "max": 200}]


def _experiment(actors: Actors, quiz: Dataset, versions: tuple[PresetVersion, PresetVersion]) -> Experiment:
    return experiment_create(
        user=actors.owner, dataset_id=quiz.pk, preset_version_ids=[v.pk for v in versions], checks=CHECKS
    )


def _body(response: Any) -> str:
    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(read)().decode()


def _batches(experiment: Experiment) -> list[Batch]:
    return [target.batch for target in experiment.targets.select_related("batch") if target.batch]


def test_two_preset_versions_run_over_a_dataset_and_the_results_equal_the_records(
    actors: Actors, quiz: Dataset, two_versions: tuple[PresetVersion, PresetVersion]
) -> None:
    experiment = _experiment(actors, quiz, two_versions)
    assert experiment.started_at is None and experiment.dataset_version == 3
    assert experiment.estimate["cost"] is not None and not experiment.estimate["blocked"]
    assert all(batch.status == BatchStatus.DRAFT for batch in _batches(experiment))
    assert not UsageRecord.objects.exists()  # the pre-flight sends nothing

    experiment_start(user=actors.owner, experiment_id=experiment.pk)
    for batch in _batches(experiment):
        run_to_the_end(batch)

    records = list(experiment_records(experiment=experiment))
    assert len(records) == 6
    summaries = experiment_summaries(experiment=experiment)
    assert [(s.target.label, s.answered, s.failed, s.records) for s in summaries] == [
        ("Quiz v1", 3, 0, 3),
        ("Quiz v2", 3, 0, 3),
    ]
    # The page's cost is the records' sum, exactly: per target by its records' own tag, and in all.
    for summary in summaries:
        own = UsageRecord.objects.filter(tags__contains=f",eval-target:{summary.target.pk},")
        assert summary.cost == sum((r.total_cost for r in own), Decimal(0)) > 0
        assert summary.prompt_tokens == sum(r.prompt_tokens for r in own)
        # Latency from the records; the engine's queue answers whole, so its records carry no TTFT.
        assert summary.latency_p50 is not None and summary.latency_p95 is not None
        assert summary.ttft_p50 is None
    assert sum(s.cost for s in summaries) == sum((r.total_cost for r in records), Decimal(0))
    # Each record is the batch item's own, tagged with the experiment, its target and its item.
    for target in experiment.targets.all():
        for item in BatchItem.objects.filter(batch__experiment_target=target):
            record = UsageRecord.objects.get(source=item.source)
            tags = record.tags.strip(",").split(",")
            assert tags == [
                f"experiment:{experiment.pk}",
                f"eval-target:{target.pk}",
                item.external_reference,
            ]
            assert record.preset_version_id == target.preset_version_id
    # v2's items filled its {{tone}} with each item's value; v1 declares none and got none.
    v1_item, v2_item = (BatchItem.objects.get(batch=batch, index=0) for batch in _batches(experiment))
    assert v2_item.request["messages"][0] == {"role": "system", "content": "Answer in a terse way."}
    assert "variables" not in v1_item.request

    rows = experiment_rows(experiment=experiment, start=0, stop=25)
    assert [row.item.input for row in rows if row.item] == [question for question, _ in QUESTIONS]
    for row in rows:
        for answer in row.answers:
            assert answer is not None and answer.state == ItemState.DONE
            assert [v.score for v in answer.verdicts][1] == 1.0  # six tokens are under 200 characters
            assert all(v.score is not None and 0 <= v.score <= 1 and v.reason for v in answer.verdicts)
    means = summaries[0].check_means
    assert means[1] == 1.0 and means[0] is not None
    line = winner_line(summaries)
    assert line.startswith(("Quiz v1:", "Quiz v2:")) and "points" in line and "% cost" in line


def test_the_results_page_and_exports_show_the_records_cost(
    actors: Actors, quiz: Dataset, two_versions: tuple[PresetVersion, PresetVersion]
) -> None:
    experiment = _experiment(actors, quiz, two_versions)
    client = client_for(actors.owner)
    draft = client.get(reverse("evals:experiment-detail", args=[experiment.pk])).content.decode()
    assert 'id="preflight-total"' in draft and 'id="experiment-start"' in draft
    client.post(reverse("evals:experiment-action", args=[experiment.pk, "start"]))
    for batch in _batches(experiment):
        run_to_the_end(batch)

    page = client.get(reverse("evals:experiment-detail", args=[experiment.pk])).content.decode()
    total = sum((r.total_cost for r in experiment_records(experiment=experiment)), Decimal(0))
    shown = [Decimal(part.split('"')[0]) for part in page.split('data-cost="')[1:]]
    assert sum(shown, Decimal(0)) == total
    assert 'id="winner"' in page and "Contains" in page

    exported = client.get(reverse("evals:experiment-export", args=[experiment.pk, "jsonl"]))
    rows = [json.loads(line) for line in _body(exported).splitlines()]
    assert len(rows) == 6 and {row["target"] for row in rows} == {"Quiz v1", "Quiz v2"}
    assert sum(Decimal(row["cost_usd"]) for row in rows) == total
    assert {"Contains score", "Contains reason", "Length in range 0-200 score"} <= set(rows[0])
    csv_text = _body(client.get(reverse("evals:experiment-export", args=[experiment.pk, "csv"])))
    assert len(csv_text.strip().splitlines()) == 7  # the header and six rows


def test_a_chain_that_dies_mid_run_is_resumed_and_nothing_is_counted_twice(
    actors: Actors, quiz: Dataset, two_versions: tuple[PresetVersion, PresetVersion]
) -> None:
    experiment = _experiment(actors, quiz, two_versions)
    experiment_start(user=actors.owner, experiment_id=experiment.pk)
    first, second = _batches(experiment)
    run_to_the_end(first)
    # The second target's first step runs (its submission sent), then its worker dies: the chain
    # is gone, its last step's message lost with it.
    batch_step_run(batch_id=second.pk, token=second.chain_token)
    second.refresh_from_db()
    dead_token = second.chain_token
    long_ago = timezone.now() - dt.timedelta(hours=1)
    Batch.objects.filter(pk=second.pk).update(lease_until=None, next_step_at=long_ago, heartbeat_at=long_ago)

    experiment_nudge(experiment=experiment)  # the results page, watched, takes the stalled chain over
    second.refresh_from_db()
    assert second.chain_token != dead_token
    run_to_the_end(second)
    assert batch_step_run(batch_id=second.pk, token=dead_token) is None  # a late copy of the dead chain

    records = list(experiment_records(experiment=experiment))
    sources = [record.source for record in records]
    assert len(records) == 6 and len(set(sources)) == 6
    summaries = experiment_summaries(experiment=experiment)
    assert [s.answered for s in summaries] == [3, 3]
    assert sum(s.cost for s in summaries) == sum((r.total_cost for r in records), Decimal(0))
    experiment_nudge(experiment=experiment)  # finished: nothing starts again
    assert UsageRecord.objects.count() == 6


def test_an_experiment_the_budget_cannot_cover_is_refused_before_anything_is_sent(
    actors: Actors, quiz: Dataset, two_versions: tuple[PresetVersion, PresetVersion]
) -> None:
    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal("0.000001"))
    experiment = _experiment(actors, quiz, two_versions)
    assert "Nothing was sent" in experiment.estimate["blocked"]
    with pytest.raises(ValidationError, match="could cost up to"):
        experiment_start(user=actors.owner, experiment_id=experiment.pk)
    experiment.refresh_from_db()
    assert experiment.started_at is None
    assert all(batch.status == BatchStatus.DRAFT for batch in _batches(experiment))
    assert not UsageRecord.objects.exists()


def test_cancel_keeps_what_was_answered_and_its_cost(
    actors: Actors, quiz: Dataset, two_versions: tuple[PresetVersion, PresetVersion]
) -> None:
    experiment = _experiment(actors, quiz, two_versions)
    experiment_start(user=actors.owner, experiment_id=experiment.pk)
    first, _second = _batches(experiment)
    run_to_the_end(first)
    experiment_cancel(user=actors.owner, experiment_id=experiment.pk)

    summaries = experiment_summaries(experiment=experiment)
    assert [(s.answered, s.cancelled) for s in summaries] == [(3, 0), (0, 3)]
    assert summaries[0].cost > 0 and summaries[1].cost == 0
    assert summaries[0].cost == sum(
        (r.total_cost for r in experiment_records(experiment=experiment)), Decimal(0)
    )
    assert experiment_records(experiment=experiment).count() == 3


def test_another_teams_experiment_is_a_404(
    actors: Actors, quiz: Dataset, two_versions: tuple[PresetVersion, PresetVersion]
) -> None:
    experiment = _experiment(actors, quiz, two_versions)
    outsider = client_for(actors.outsider)
    for url in (
        reverse("evals:experiment-detail", args=[experiment.pk]),
        reverse("evals:experiment-export", args=[experiment.pk, "csv"]),
    ):
        assert outsider.get(url).status_code == 404
    assert outsider.post(reverse("evals:experiment-action", args=[experiment.pk, "start"])).status_code == 404
    assert outsider.post(reverse("evals:experiment-progress", args=[experiment.pk])).status_code == 404
    experiment.refresh_from_db()
    assert experiment.started_at is None
    # Nor can they run our dataset, or our preset versions on a dataset of theirs.
    ours = [two_versions[0].pk]
    with pytest.raises(ExperimentNotFound):
        experiment_create(user=actors.outsider, dataset_id=quiz.pk, preset_version_ids=ours, checks=[])
    theirs = dataset_create(user=actors.outsider, team_id=actors.other_team.pk, name="Theirs")
    dataset_item_add(user=actors.outsider, dataset_id=theirs.pk, fields=ItemFields(input="hi"))
    with pytest.raises(ValidationError, match="dataset's team's presets"):
        experiment_create(user=actors.outsider, dataset_id=theirs.pk, preset_version_ids=ours, checks=[])
