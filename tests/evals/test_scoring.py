"""Stored verdicts and the LLM judge: answers are scored once, in the worker, and the results page
reads the stored rows (it runs no check); a judge on a loopback upstream answering a good
verdict, garbage and a 500, its calls recorded with their own cost and shown apart."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse

from playground.batches.tasks import batch_step
from playground.celery import app as celery_app
from playground.evals.models import CheckResult, Dataset, Experiment
from playground.evals.results import experiment_records, experiment_rows, experiment_summaries
from playground.evals.services.experiments import experiment_create, experiment_start
from playground.evals.services.scoring import JUDGE_ATTEMPTS, target_score
from playground.presets.models import PresetVersion
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord
from tests.evals.conftest import QUESTIONS, run_to_the_end
from tests.fakes.upstream import (
    FakeUpstream,
    RecordedRequest,
    chat_completion,
    computed,
    error,
    json_reply,
    usage,
)
from tests.support.actors import Actors
from tests.support.batches import QUEUE_MODEL
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db

CHECKS: list[dict[str, Any]] = [{"kind": "contains", "ignore_case": True}, {"kind": "length", "max": 200}]
JUDGE_PROMPT = "Question: {{input}}\nExpected: {{expected}}\nAnswer: {{ output }}\nIs the answer right?"


def _experiment(
    actors: Actors, quiz: Dataset, versions: tuple[PresetVersion, ...], checks: list[dict[str, Any]]
) -> Experiment:
    return experiment_create(
        user=actors.owner, dataset_id=quiz.pk, preset_version_ids=[v.pk for v in versions], checks=checks
    )


def _run(actors: Actors, experiment: Experiment) -> None:
    experiment_start(user=actors.owner, experiment_id=experiment.pk)
    for target in experiment.targets.select_related("batch"):
        assert target.batch is not None
        run_to_the_end(target.batch)


def _no_checks_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a check ran while a page was read")

    for module in ("playground.evals.checks", "playground.evals.services.scoring"):
        monkeypatch.setattr(f"{module}.check_run", refuse)
        monkeypatch.setattr(f"{module}.judge_verdict", refuse)


def test_answers_are_scored_once_and_the_results_page_runs_no_check(
    actors: Actors,
    quiz: Dataset,
    two_versions: tuple[PresetVersion, PresetVersion],
    monkeypatch: pytest.MonkeyPatch,
    django_assert_num_queries: Any,
) -> None:
    experiment = _experiment(actors, quiz, two_versions, CHECKS)
    _run(actors, experiment)
    # A row per item x target x check, each a score in [0, 1] with its reason.
    rows = CheckResult.objects.filter(target__experiment=experiment)
    assert rows.count() == 3 * 2 * 2
    assert all(0 <= row.score <= 1 and row.reason and row.judged_at for row in rows if row.score is not None)
    assert set(rows.filter(position=1).values_list("score", flat=True)) == {1.0}  # six tokens < 200 chars

    _no_checks_run(monkeypatch)
    client = client_for(actors.owner)
    page = client.get(reverse("evals:experiment-detail", args=[experiment.pk]))
    assert page.status_code == 200
    assert "6 characters" in page.content.decode() or "characters, in range" in page.content.decode()
    summaries = experiment_summaries(experiment=experiment)
    assert [(s.answered, s.scored, s.unscored, s.judging) for s in summaries] == [(3, 3, 0, 0)] * 2
    assert summaries[0].check_means[1] == 1.0
    assert 'id="experiment-running"' not in page.content.decode()  # all scored: the page stops polling

    # Scored again after a step that answered nothing new: the target and its unscored answers
    # are read, nothing else (no judge rows are looked for in an experiment without a judge).
    target = experiment.targets.first()
    assert target is not None
    with django_assert_num_queries(2):
        assert target_score(target_id=target.pk) is False
    assert CheckResult.objects.filter(target__experiment=experiment).count() == 3 * 2 * 2


def test_an_experiment_answered_before_verdicts_were_stored_is_scored_by_the_command(
    actors: Actors, quiz: Dataset, two_versions: tuple[PresetVersion, PresetVersion]
) -> None:
    experiment = _experiment(actors, quiz, two_versions[:1], CHECKS)
    _run(actors, experiment)
    before = sorted(CheckResult.objects.values_list("index", "position", "score", "reason"))
    CheckResult.objects.all().delete()
    summary = experiment_summaries(experiment=experiment)[0]
    assert (summary.answered, summary.unscored, summary.check_means) == (3, 3, [None, None])

    call_command("evals_score", experiment=experiment.pk)
    call_command("evals_score")  # again: nothing is stored twice

    assert sorted(CheckResult.objects.values_list("index", "position", "score", "reason")) == before
    assert experiment_summaries(experiment=experiment)[0].unscored == 0


def test_the_worker_scores_a_target_after_each_step_of_its_batch(
    actors: Actors, quiz: Dataset, two_versions: tuple[PresetVersion, PresetVersion]
) -> None:
    experiment = _experiment(actors, quiz, two_versions[:1], CHECKS)
    experiment_start(user=actors.owner, experiment_id=experiment.pk)
    target = experiment.targets.select_related("batch").get()
    assert target.batch is not None
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True  # the step and the scoring it starts run here, in turn
    try:
        for _ in range(200):
            target.batch.refresh_from_db()
            if target.batch.finished_at is not None:
                break
            batch_step.apply((target.batch.pk, target.batch.chain_token))
    finally:
        celery_app.conf.task_always_eager = eager
    assert CheckResult.objects.filter(target=target).count() == 3 * 2


def _judge_reply(request: RecordedRequest) -> Any:
    """The judge's verdict by the question it is shown: good, garbage, or a 500."""
    prompt = str(request.json["messages"][-1]["content"]) if request.json else ""
    if QUESTIONS[0][0] in prompt:
        body = '```json\n{"score": 0.9, "reason": "Names Paris."}\n```'
    elif QUESTIONS[1][0] in prompt:
        body = "I would say it is mostly fine."
    else:
        return error(500)
    return json_reply(chat_completion(body, usage_body=usage(120, 15)))


def test_a_judge_on_a_loopback_upstream_scores_good_garbage_and_failed_calls_apart_from_the_cost(
    actors: Actors,
    quiz: Dataset,
    two_versions: tuple[PresetVersion, PresetVersion],
    openai_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.UPSTREAM_MAX_RETRIES = 0
    judge = {
        "kind": "judge",
        "prompt": JUDGE_PROMPT,
        "connection": openai_connection.pk,
        "model": QUEUE_MODEL,
    }
    experiment = _experiment(actors, quiz, two_versions, [*CHECKS, judge])
    # The pre-flight prices the judge's calls too, apart, and counts them in the total.
    labels = [row["label"] for row in experiment.estimate["per_target"]]
    assert labels == ["Quiz v1", "Quiz v2", f"Judge: LLM judge {QUEUE_MODEL}"]
    judged_estimate = Decimal(experiment.estimate["per_target"][2]["cost"])
    assert judged_estimate > 0
    assert Decimal(experiment.estimate["cost"]) == sum(
        (Decimal(row["cost"]) for row in experiment.estimate["per_target"]), Decimal(0)
    )
    fake_upstream.script(*[computed(_judge_reply) for _ in range(6)])

    _run(actors, experiment)

    # Six judge calls (3 items x 2 targets), the prompt's placeholders filled.
    assert len(fake_upstream.requests) == 6
    sent = fake_upstream.requests[0].json
    assert sent is not None and "{{" not in sent["messages"][0]["content"]
    assert sent["response_format"]["type"] == "json_schema"
    judged = {row.index: row for row in CheckResult.objects.filter(position=2, target__position=0)}
    assert (judged[0].score, judged[0].passed, judged[0].reason) == (0.9, True, "Names Paris.")
    assert judged[1].score is None and not judged[1].passed
    assert judged[1].reason.startswith("The judge did not answer JSON")
    assert judged[2].score is None and judged[2].reason.startswith("The judge's call failed")
    assert all(row.judged_at and row.usage_record_id for row in judged.values())

    # Each judge call is a record of its own, tagged apart from the experiment's answers.
    judge_records = UsageRecord.objects.filter(source__startswith="eval-judge:")
    assert judge_records.count() == 6
    assert not experiment_records(experiment=experiment).filter(source__startswith="eval-judge:").exists()
    summaries = experiment_summaries(experiment=experiment)
    for summary in summaries:
        own = judge_records.filter(tags__contains=f",judge-target:{summary.target.pk},")
        assert own.count() == 3
        assert summary.judge_cost == sum((r.total_cost for r in own), Decimal(0)) > 0
        assert summary.check_means[2] == pytest.approx(0.9)  # the garbage and the 500 score nothing
        assert summary.judging == 0
    assert sum(s.judge_cost for s in summaries) <= judged_estimate

    _no_checks_run(monkeypatch)
    page = client_for(actors.owner).get(reverse("evals:experiment-detail", args=[experiment.pk]))
    html = page.content.decode()
    assert "+ judge" in html and "The judge did not answer JSON" in html and "Names Paris." in html
    shown = [Decimal(part.split('"')[0]) for part in html.split('data-judge-cost="')[1:]]
    assert sum(shown, Decimal(0)) == sum((r.total_cost for r in judge_records), Decimal(0))
    answers = experiment_rows(experiment=experiment, start=0, stop=3)[0].answers
    assert answers[0] is not None and [v.passed for v in answers[0].verdicts][2] is True


def test_a_judge_on_another_teams_connection_is_refused(
    actors: Actors, quiz: Dataset, two_versions: tuple[PresetVersion, PresetVersion]
) -> None:
    judge = {"kind": "judge", "prompt": "Rate {{output}}", "connection": 999_999, "model": QUEUE_MODEL}
    with pytest.raises(ValidationError, match="not one of the team's"):
        _experiment(actors, quiz, two_versions, [judge])


def test_a_judge_call_that_ends_without_its_verdict_is_tried_again_then_says_why(
    actors: Actors,
    quiz: Dataset,
    two_versions: tuple[PresetVersion, PresetVersion],
    openai_connection: ProviderConnection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judge = {
        "kind": "judge",
        "prompt": "Rate {{output}}",
        "connection": openai_connection.pk,
        "model": QUEUE_MODEL,
    }
    experiment = _experiment(actors, quiz, two_versions[:1], [judge])
    calls: list[int] = []

    async def busy(target: Any, job: Any, *args: Any) -> None:
        calls.append(job.row.pk)
        raise RuntimeError("database is locked")

    monkeypatch.setattr("playground.evals.services.scoring._judge_one", busy)
    _run(actors, experiment)  # each round releases its rows; the next tries them again

    rows = list(CheckResult.objects.filter(target__experiment=experiment))
    assert len(rows) == 3 and len(calls) == 3 * JUDGE_ATTEMPTS
    assert all(row.score is None and row.judged_at and row.attempt == JUDGE_ATTEMPTS for row in rows)
    assert all(row.reason.startswith("The judge's verdict could not be stored after 3 tries") for row in rows)
    assert experiment_summaries(experiment=experiment)[0].judging == 0  # the page stops waiting
