"""The answer's diff against the expected output, and two experiments on the same dataset version
side by side (others refused with the reason, another team's a 404)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from playground.evals.compare import comparable_experiments, item_pairs, target_pairs
from playground.evals.diffs import MAX_TOKENS, Piece, answer_diff
from playground.evals.models import Dataset, Experiment
from playground.evals.results import experiment_summaries
from playground.evals.services.datasets import dataset_item_add
from playground.evals.services.experiments import experiment_create, experiment_start
from playground.evals.uploads import ItemFields
from playground.presets.models import PresetVersion
from playground.usage.money import money
from tests.evals.conftest import QUESTIONS, run_to_the_end
from tests.support.actors import Actors
from tests.support.clients import client_for

CHECKS = [{"kind": "contains", "ignore_case": True}, {"kind": "length", "max": 200}]


def test_the_diff_marks_words_removed_from_and_added_to_the_expected_output() -> None:
    diff = answer_diff("The capital is Paris.\nSee you", "The capital is Lyon.\nSee you")
    assert diff is not None and not diff.same
    assert diff.pieces == [
        Piece("same", "The capital is "),
        Piece("removed", "Paris"),
        Piece("added", "Lyon"),
        Piece("same", ".\nSee you"),
    ]
    assert 70 < diff.similarity < 100
    same = answer_diff("Paris", "Paris")
    assert same is not None and same.same and same.pieces == [Piece("same", "Paris")]
    assert answer_diff("", "anything") is None  # no expected output: nothing to compare


def test_a_long_answer_is_compared_on_its_first_tokens_and_says_so() -> None:
    diff = answer_diff("word " * 10, "word " * (MAX_TOKENS + 10))
    assert diff is not None and diff.truncated


def test_the_diff_is_drawn_escaped() -> None:
    html = render_to_string(
        "evals/_diff.html", {"text": "<b>Lyon</b> & co", "expected": "<script>alert(1)</script>"}
    )
    assert "<script>" not in html and "<b>" not in html  # the pieces are escaped, only <ins>/<del> are tags
    assert '<del title="in the expected output, not in the answer">script</del>' in html
    assert '<ins title="in the answer, not in the expected output"> &amp; co</ins>' in html
    assert "&lt;" in html and "% alike" in html
    assert "Same as expected" in render_to_string("evals/_diff.html", {"text": "Paris", "expected": "Paris"})
    assert render_to_string("evals/_diff.html", {"text": "Paris", "expected": ""}).strip() == ""


def _run(actors: Actors, quiz: Dataset, version: PresetVersion, name: str) -> Experiment:
    experiment = experiment_create(
        user=actors.owner, dataset_id=quiz.pk, preset_version_ids=[version.pk], checks=CHECKS, name=name
    )
    experiment_start(user=actors.owner, experiment_id=experiment.pk)
    for target in experiment.targets.select_related("batch"):
        assert target.batch is not None
        run_to_the_end(target.batch)
    experiment.refresh_from_db()
    return experiment


@pytest.mark.django_db
def test_two_experiments_on_one_version_compare_side_by_side_and_others_are_refused(
    actors: Actors, quiz: Dataset, two_versions: tuple[PresetVersion, PresetVersion]
) -> None:
    first = _run(actors, quiz, two_versions[0], "v1 run")
    second = _run(actors, quiz, two_versions[1], "v2 run")
    dataset_item_add(user=actors.owner, dataset_id=quiz.pk, fields=ItemFields(input="New", expected="x"))
    later = _run(actors, quiz, two_versions[0], "on v4")  # the dataset's next version

    assert list(comparable_experiments(user=actors.owner, experiment=first)) == [second]
    pairs = target_pairs(first, second)
    assert len(pairs) == 1
    pair = pairs[0]
    a, b = experiment_summaries(experiment=first)[0], experiment_summaries(experiment=second)[0]
    metrics = {metric.name: metric for metric in pair.metrics}
    assert list(metrics)[2:] == [
        "Score (points)",
        "Pass rate",
        "Cost",
        "Cost per item",
        "Cached share",
        "TTFT p50",
        "TTFT p95",
    ]
    assert len(metrics) == 2 + 7  # one mean per check
    assert (metrics["Cost"].a, metrics["Cost"].b) == (money(a.cost), money(b.cost))
    assert a.cost > 0 and b.cost > 0
    if a.cost != b.cost:
        assert metrics["Cost"].better == (b.cost < a.cost)
        assert metrics["Cost"].delta.startswith("+" if b.cost > a.cost else "\u2212")
    rows = item_pairs(first, second, start=0, stop=25)
    assert [row.item.input for row in rows if row.item] == [question for question, _ in QUESTIONS]
    for row in rows:
        [(answer_a, answer_b)] = row.answers
        assert answer_a is not None and answer_b is not None and answer_a.state == answer_b.state == "done"

    client = client_for(actors.viewer)  # readers compare too
    url = reverse("evals:compare")
    page = client.get(url, {"a": first.pk, "b": second.pk})
    text = page.content.decode()
    assert page.status_code == 200
    assert "v1 run" in text and "v2 run" in text
    assert money(a.cost) in text and money(b.cost) in text
    picker = client.get(url, {"a": first.pk}).content.decode()
    assert f'<option value="{second.pk}">' in picker and f'<option value="{later.pk}">' not in picker
    refused = client.get(url, {"a": first.pk, "b": later.pk})
    assert refused.status_code == 400 and "different datasets or dataset versions" in refused.content.decode()
    alone = client.get(url, {"a": later.pk}).content.decode()
    assert "No other started experiment ran on Quiz v4" in alone
    assert client_for(actors.outsider).get(url, {"a": first.pk}).status_code == 404
    assert client.get(url, {"a": first.pk, "b": 10**9}).status_code == 404
    assert client.get(url, {"a": "9" * 30}).status_code == 404  # no bigint overflow
    assert Decimal(0) < a.cost
