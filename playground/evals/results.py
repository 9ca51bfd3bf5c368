"""An experiment's results: per target its scores, cost, cached share and timings; per item the
answers side by side with each check's verdict; the winner line. Reads only.

Costs and tokens are summed from the usage records the experiment's batches wrote (tagged
`eval-target:<id>`), every attempt included, so the page's cost is the records' sum exactly; a
judge's calls are summed apart (`judge-target:<id>`), as the judge's cost. Verdicts are read as
stored (`CheckResult`, written in the worker by `services.scoring`): no check runs here.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Avg, Count, Q, QuerySet, Sum, Value
from django.db.models.functions import StrIndex

from playground.batches.models import BatchItem, ItemState
from playground.evals.checks import check_label
from playground.evals.models import ITEM_REFERENCE, CheckResult, DatasetItem, Experiment, ExperimentTarget
from playground.evals.services.scoring import judge_tags
from playground.usage.models import UsageRecord, UsageStatus

ROWS_PER_PAGE = 25
SAME_TTFT_SHARE = 0.1  # TTFTs within 10 % of each other read "same TTFT"


@dataclass
class TargetSummary:
    target: ExperimentTarget
    items: int
    answered: int = 0
    failed: int = 0
    open: int = 0  # pending or sent, not answered yet
    cancelled: int = 0
    check_means: list[float | None] = field(default_factory=list)  # per check, over scored items
    scored: int = 0  # answered items with stored verdicts
    judging: int = 0  # judge verdicts still to come
    passed: int = 0  # scored items that pass every check
    cost: Decimal = Decimal(0)  # the records' sum, every attempt
    judge_cost: Decimal = Decimal(0)  # the judge's calls' records, apart from the answers'
    judge_records: int = 0
    records: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    ttft_p50: float | None = None
    ttft_p95: float | None = None
    latency_p50: float | None = None
    latency_p95: float | None = None

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.scored if self.scored else None

    @property
    def unscored(self) -> int:
        """Answered items whose verdicts are not stored yet (the worker is on it)."""
        return self.answered - self.scored

    @property
    def score(self) -> float | None:
        """The mean of the checks' means, in points (0-100)."""
        means = [mean for mean in self.check_means if mean is not None]
        return 100 * statistics.fmean(means) if means else None

    @property
    def cost_per_item(self) -> Decimal | None:
        return self.cost / self.answered if self.answered else None

    @property
    def cached_share(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None


@dataclass(frozen=True)
class StoredVerdict:
    """A check's verdict as stored: `score` None is no verdict (a judge still to answer, or one
    that answered nothing usable; `reason` says which)."""

    score: float | None
    reason: str
    passed: bool


@dataclass(frozen=True)
class Answer:
    state: str
    text: str
    error: str
    verdicts: list[StoredVerdict]  # in check order; empty while the item is not scored yet
    cost: Decimal | None
    ttft_ms: int | None
    latency_ms: int | None


@dataclass(frozen=True)
class ItemRow:
    index: int
    item: DatasetItem | None
    answers: list[Answer | None]  # one per target, in target order


def experiment_targets(experiment: Experiment) -> list[ExperimentTarget]:
    return list(experiment.targets.select_related("batch", "preset_version"))


def experiment_summaries(*, experiment: Experiment) -> list[TargetSummary]:
    """One summary per target, from its items' states, its stored verdicts and its records: a
    handful of aggregate queries per target, whatever the number of items and checks."""
    summaries = []
    for target in experiment_targets(experiment):
        summary = TargetSummary(target=target, items=experiment.item_count)
        states = dict(_target_items(target).order_by().values_list("state").annotate(n=Count("pk")))
        summary.answered = states.get(ItemState.DONE, 0)
        summary.failed = states.get(ItemState.FAILED, 0)
        summary.cancelled = states.get(ItemState.CANCELLED, 0)
        summary.open = sum(states.values()) - summary.answered - summary.failed - summary.cancelled
        _add_verdicts(summary, target, len(experiment.checks))
        _add_records(summary, target)
        summaries.append(summary)
    return summaries


def _add_verdicts(summary: TargetSummary, target: ExperimentTarget, checks: int) -> None:
    results = CheckResult.objects.filter(target=target)
    means = dict(results.order_by().values_list("position").annotate(mean=Avg("score")))
    summary.check_means = [means.get(position) for position in range(checks)]
    per_item = results.order_by().values("batch_item").annotate(ok=Count("pk", filter=Q(passed=True)))
    summary.scored = per_item.count()
    summary.passed = per_item.filter(ok=checks).count() if checks else 0
    summary.judging = results.filter(judged_at__isnull=True).count()


def experiment_records(*, experiment: Experiment) -> QuerySet[UsageRecord]:
    """Every record the experiment's batches wrote (the tag its targets' records carry)."""
    return _tagged(experiment.team_id, f"experiment:{experiment.pk}")


def winner_line(summaries: Sequence[TargetSummary]) -> str:
    """ "v3: +12 points, -18 % cost, same TTFT" for the best-scoring target against the first
    (against the second when the first wins); "" with fewer than two scored targets."""
    scored = [summary for summary in summaries if summary.score is not None]
    if len(scored) < 2:
        return ""
    best = max(scored, key=lambda s: (s.score or 0, -(s.cost_per_item or 0)))
    base = scored[0] if best is not scored[0] else scored[1]
    points = (best.score or 0) - (base.score or 0)
    parts = [f"{best.target.label}: {_signed(round(points))} points"]
    if best.cost_per_item is not None and base.cost_per_item:
        change = float(best.cost_per_item / base.cost_per_item - 1) * 100
        parts.append(f"{_signed(round(change))} % cost")
    if best.ttft_p50 is not None and base.ttft_p50:
        change = best.ttft_p50 / base.ttft_p50 - 1
        parts.append(
            "same TTFT" if abs(change) <= SAME_TTFT_SHARE else f"{_signed(round(change * 100))} % TTFT"
        )
    return f"{', '.join(parts)} (against {base.target.label})"


def experiment_rows(*, experiment: Experiment, start: int, stop: int) -> list[ItemRow]:
    """Items `start`..`stop - 1` (batch index order = the version's item order), each with every
    target's answer and verdicts: one query per target and one for the dataset items."""
    targets = experiment_targets(experiment)
    verdicts = _stored_verdicts(targets, start, stop)
    by_target: list[dict[int, BatchItem]] = []
    for target in targets:
        items = _target_items(target).filter(index__gte=start, index__lt=stop).select_related("usage_record")
        by_target.append({item.index: item for item in items})
    references = {item.external_reference for found in by_target for item in found.values()}
    ids = [int(ref.removeprefix(ITEM_REFERENCE)) for ref in references if ref.startswith(ITEM_REFERENCE)]
    dataset_items = {f"{ITEM_REFERENCE}{item.pk}": item for item in DatasetItem.objects.filter(pk__in=ids)}
    rows = []
    for index in range(start, min(stop, experiment.item_count)):
        answers: list[Answer | None] = []
        item = None
        for target, found in zip(targets, by_target, strict=True):
            batch_item = found.get(index)
            if batch_item is None:
                answers.append(None)
                continue
            item = item or dataset_items.get(batch_item.external_reference)
            answers.append(_answer(batch_item, verdicts.get((target.pk, index), [])))
        rows.append(ItemRow(index=index, item=item, answers=answers))
    return rows


def experiment_export_page(*, experiment: Experiment, start: int, stop: int) -> list[dict[str, Any]]:
    """One row per item and target of items `start`..`stop - 1`, for CSV and JSONL."""
    labels = [check_label(check) for check in experiment.checks]
    targets = experiment_targets(experiment)
    out_rows = []
    for row in experiment_rows(experiment=experiment, start=start, stop=stop):
        for target, answer in zip(targets, row.answers, strict=True):
            out: dict[str, Any] = {
                "item": row.item.pk if row.item else None,
                "target": target.label,
                "state": answer.state if answer else "",
                "input": _input_text(row.item),
                "expected": row.item.expected if row.item else "",
                "answer": answer.text if answer else "",
                "error": answer.error if answer else "",
                "cost_usd": str(answer.cost) if answer and answer.cost is not None else "",
                "ttft_ms": answer.ttft_ms if answer else None,
                "latency_ms": answer.latency_ms if answer else None,
            }
            for label, verdict in zip(labels, answer.verdicts if answer else [], strict=False):
                out[f"{label} score"] = verdict.score
                out[f"{label} reason"] = verdict.reason
            out_rows.append(out)
    return out_rows


def check_labels(experiment: Experiment) -> list[str]:
    return [check_label(check) for check in experiment.checks]


def _input_text(item: DatasetItem | None) -> str:
    if item is None:
        return ""
    if item.messages:
        return str(item.messages[-1].get("content", ""))
    return item.input


def _answer(item: BatchItem, verdicts: list[StoredVerdict]) -> Answer:
    record = item.usage_record
    return Answer(
        state=item.state,
        text=(item.response or {}).get("text", "") if item.response else "",
        error=item.error,
        verdicts=verdicts if item.state == ItemState.DONE else [],
        cost=record.total_cost if record else None,
        ttft_ms=record.ttft_ms if record else None,
        latency_ms=record.latency_ms if record else None,
    )


def _stored_verdicts(
    targets: Sequence[ExperimentTarget], start: int, stop: int
) -> dict[tuple[int, int], list[StoredVerdict]]:
    """The stored verdicts of items `start`..`stop - 1`, by (target, index), in check order."""
    rows = CheckResult.objects.filter(target__in=targets, index__gte=start, index__lt=stop).order_by(
        "target", "index", "position"
    )
    found: dict[tuple[int, int], list[StoredVerdict]] = {}
    for target_id, index, score, passed, reason in rows.values_list(
        "target_id", "index", "score", "passed", "reason"
    ):
        found.setdefault((target_id, index), []).append(StoredVerdict(score, reason, passed))
    return found


def _target_items(target: ExperimentTarget) -> QuerySet[BatchItem]:
    if target.batch_id is None:
        return BatchItem.objects.none()
    return BatchItem.objects.filter(batch_id=target.batch_id).order_by("index")


def _tagged(team_id: int, tag: str) -> QuerySet[UsageRecord]:
    return (
        UsageRecord.objects.filter(team_id=team_id)
        .alias(tag_at=StrIndex("tags", Value(f",{tag},")))
        .filter(tag_at__gt=0)
    )


def _add_records(summary: TargetSummary, target: ExperimentTarget) -> None:
    records = _tagged(summary.target.experiment.team_id, f"eval-target:{target.pk}")
    sums = records.aggregate(
        n=Count("id"),
        cost=Sum("total_cost"),
        prompt=Sum("prompt_tokens"),
        cached=Sum("cached_tokens", filter=Q(cached_tokens__isnull=False)),
    )
    summary.records = sums["n"]
    summary.cost = sums["cost"] or Decimal(0)
    summary.prompt_tokens = sums["prompt"] or 0
    summary.cached_tokens = sums["cached"] or 0
    timings = list(records.filter(status=UsageStatus.OK).values_list("ttft_ms", "latency_ms"))
    summary.ttft_p50, summary.ttft_p95 = _percentiles([t for t, _ in timings if t is not None])
    summary.latency_p50, summary.latency_p95 = _percentiles([lat for _, lat in timings if lat is not None])
    _, own = judge_tags(experiment_id=target.experiment_id, target_id=target.pk)
    judged = _tagged(summary.target.experiment.team_id, own).aggregate(n=Count("id"), cost=Sum("total_cost"))
    summary.judge_records = judged["n"]
    summary.judge_cost = judged["cost"] or Decimal(0)


def _percentiles(values: list[int]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    if len(values) == 1:
        return float(values[0]), float(values[0])
    cuts = statistics.quantiles(values, n=20, method="inclusive")  # 19 cuts: 5 %, 10 %, ... 95 %
    return statistics.median(values), cuts[18]


MINUS = "\u2212"  # the typographic minus: "-18 %" reads as a dash in running text


def _signed(value: int) -> str:
    return f"+{value}" if value > 0 else f"{MINUS}{abs(value)}" if value < 0 else "±0"
