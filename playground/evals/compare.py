"""Two experiments on the same dataset version, side by side: per target their figures with the
change from the first (A) to the second (B), and per item the two answers with their verdicts.

Targets are paired by position (A's first target with B's first, ...), the way each experiment
lists them; a target with no partner shows alone. Checks are paired by their label, so a check
only one experiment ran shows for that one only. Everything is read through `results`, as the
experiment's own page reads it. Reads only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from itertools import zip_longest

from django.db.models import QuerySet

from playground.accounts.selectors import AnyUser
from playground.evals.models import DatasetItem, Experiment
from playground.evals.results import (
    MINUS,
    Answer,
    TargetSummary,
    check_labels,
    experiment_rows,
    experiment_summaries,
)
from playground.evals.selectors import experiment_list
from playground.usage.money import money

NOT_COMPARABLE = (
    "These two experiments ran on different datasets or dataset versions: only experiments on "
    "the same dataset version answer the same items."
)


@dataclass(frozen=True)
class Metric:
    """One figure of a target pair: A's, B's and the change, `better` True/False/None (no say)."""

    name: str
    a: str
    b: str
    delta: str
    better: bool | None


@dataclass(frozen=True)
class TargetPair:
    a: TargetSummary | None
    b: TargetSummary | None
    metrics: list[Metric]


@dataclass(frozen=True)
class ItemPair:
    index: int
    item: DatasetItem | None
    answers: list[tuple[Answer | None, Answer | None]]  # per target pair


def comparable_experiments(*, user: AnyUser, experiment: Experiment) -> QuerySet[Experiment]:
    """The user's other experiments on `experiment`'s dataset version (started ones only)."""
    return (
        experiment_list(user=user)
        .filter(
            dataset_id=experiment.dataset_id,
            dataset_version=experiment.dataset_version,
            started_at__isnull=False,
        )
        .exclude(pk=experiment.pk)
    )


def same_items(a: Experiment, b: Experiment) -> bool:
    return a.dataset_id == b.dataset_id and a.dataset_version == b.dataset_version


def target_pairs(a: Experiment, b: Experiment) -> list[TargetPair]:
    labels_a, labels_b = check_labels(a), check_labels(b)
    checks = list(dict.fromkeys([*labels_a, *labels_b]))
    pairs = []
    for first, second in zip_longest(experiment_summaries(experiment=a), experiment_summaries(experiment=b)):
        metrics = [
            _metric(
                f"{label} (mean)",
                _check_mean(first, labels_a, label),
                _check_mean(second, labels_b, label),
                _score,
                higher_is_better=True,
            )
            for label in checks
        ]
        metrics += [
            _metric("Score (points)", _get(first, "score"), _get(second, "score"), _points, True),
            _metric("Pass rate", _get(first, "pass_rate"), _get(second, "pass_rate"), _percent, True),
            _metric("Cost", _get(first, "cost"), _get(second, "cost"), _money, False),
            _metric(
                "Cost per item", _get(first, "cost_per_item"), _get(second, "cost_per_item"), _money, False
            ),
            _metric(
                "Cached share", _get(first, "cached_share"), _get(second, "cached_share"), _percent, True
            ),
            _metric("TTFT p50", _get(first, "ttft_p50"), _get(second, "ttft_p50"), _ms, False),
            _metric("TTFT p95", _get(first, "ttft_p95"), _get(second, "ttft_p95"), _ms, False),
        ]
        pairs.append(TargetPair(a=first, b=second, metrics=metrics))
    return pairs


def item_pairs(a: Experiment, b: Experiment, *, start: int, stop: int) -> list[ItemPair]:
    """Items `start`..`stop - 1` of the shared version, each with every target pair's answers."""
    rows_b = {row.index: row for row in experiment_rows(experiment=b, start=start, stop=stop)}
    pairs = []
    for row in experiment_rows(experiment=a, start=start, stop=stop):
        other = rows_b.get(row.index)
        answers_b = other.answers if other else []
        pairs.append(
            ItemPair(
                index=row.index,
                item=row.item or (other.item if other else None),
                answers=list(zip_longest(row.answers, answers_b)),
            )
        )
    return pairs


Value = float | Decimal | None


def _get(summary: TargetSummary | None, name: str) -> Value:
    value: Value = getattr(summary, name) if summary is not None else None
    return value


def _check_mean(summary: TargetSummary | None, labels: list[str], label: str) -> float | None:
    if summary is None or label not in labels:
        return None
    means = summary.check_means
    position = labels.index(label)
    return means[position] if position < len(means) else None


def _metric(name: str, a: Value, b: Value, shown: Callable[[Value], str], higher_is_better: bool) -> Metric:
    if a is None or b is None:
        return Metric(name, shown(a), shown(b), "", None)
    change = float(b) - float(a)
    delta = _signed_change(a, b, shown)
    better = None if abs(change) < 1e-12 else (change > 0) == higher_is_better
    return Metric(name, shown(a), shown(b), delta, better)


def _signed_change(a: Value, b: Value, shown: Callable[[Value], str]) -> str:
    """B - A in the figure's own unit, and for costs and times also as a share of A."""
    assert a is not None and b is not None
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        difference: float | Decimal = b - a
    else:
        difference = float(b) - float(a)
    text = shown(-difference if difference < 0 else difference)
    if shown in (_percent, _points, _score):
        text = text.removesuffix(" %") + (" points" if shown is _percent else "")
    sign = "+" if difference > 0 else MINUS if difference < 0 else "±"
    relative = ""
    if shown in (_money, _ms) and float(a):
        relative = f" ({_share(float(b) / float(a) - 1)})"
    return f"{sign}{text}{relative}"


def _share(change: float) -> str:
    value = round(change * 100)
    return f"+{value} %" if value > 0 else f"{MINUS}{abs(value)} %" if value < 0 else "±0 %"


def _score(value: Value) -> str:
    return "—" if value is None else f"{float(value):.2f}"


def _points(value: Value) -> str:
    return "—" if value is None else f"{float(value):.1f}"


def _percent(value: Value) -> str:
    return "—" if value is None else f"{float(value) * 100:.0f} %"


def _money(value: Value) -> str:
    return "—" if value is None else money(value)


def _ms(value: Value) -> str:
    return "—" if value is None else f"{float(value):.0f} ms"
