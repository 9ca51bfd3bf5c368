"""Experiments: a dataset version's items sent to each target (a preset version) as one batch.

Each target is an ordinary batch (`batches.services`): the same input checks and estimate, the
same budget hold per item, the same chain of Celery steps (resumed by the watchdog or the nudge
after a worker dies; an item's record and result commit together under a unique source, so
nothing is recorded twice) and the same usage records, tagged `experiment:<id>`,
`eval-target:<id>` and `eval-item:<dataset item id>` (`Batch.record_tags`). An experiment is a
draft with its pre-flight until the user starts it; starting is refused, with nothing sent,
when the budget cannot cover the whole experiment's worst case.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from decimal import Decimal
from functools import partial
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from playground.accounts.permissions import require_run_role
from playground.batches.models import Batch
from playground.batches.services.actions import batch_cancel, batch_confirm, batch_discard
from playground.batches.services.chain import batch_nudge_if_stalled
from playground.batches.services.drafts import (
    BatchEstimate,
    BatchInput,
    BatchInputInvalid,
    batch_draft_create,
    batch_estimate_today,
)
from playground.evals.checks import JUDGE_INSTRUCTION, JUDGE_MAX_TOKENS, check_label, check_problem, is_judge
from playground.evals.models import ITEM_REFERENCE, Dataset, DatasetItem, Experiment, ExperimentTarget
from playground.evals.selectors import dataset_get, dataset_version_items, experiment_get
from playground.evals.services.scoring import target_unscored
from playground.presets.selectors import preset_version_setup
from playground.presets.setup import PresetSetup
from playground.providers.selectors import connection_list_runnable
from playground.usage.budgets import budget_headroom
from playground.usage.calls.kinds import batch_context
from playground.usage.estimates import worst_case_estimate
from playground.usage.metering import estimate_tokens
from playground.usage.money import money
from playground.usage.records import request_price_card

MAX_TARGETS = 4


class ExperimentNotFound(Exception):
    """No experiment (or dataset) with that id in the user's teams (answered as 404)."""


def experiment_create(
    *,
    user: User,
    dataset_id: int,
    preset_version_ids: Sequence[int],
    checks: list[dict[str, Any]],
    name: str = "",
) -> Experiment:
    """A draft: one batch draft per target over the dataset's newest version, and the pre-flight.

    Refused (`ValidationError`) for a dataset without items, a version another team owns, a
    check that cannot run, or items a target cannot send (each named by its dataset line)."""
    dataset = dataset_get(user=user, dataset_id=dataset_id)
    if dataset is None:
        raise ExperimentNotFound(dataset_id)
    require_run_role(user=user, team_id=dataset.team_id)
    ids = list(dict.fromkeys(preset_version_ids))  # in the order given: the first is the baseline
    if not 1 <= len(ids) <= MAX_TARGETS:
        raise ValidationError({"targets": f"Choose 1 to {MAX_TARGETS} preset versions."})
    problems = [problem for check in checks if (problem := check_problem(check))]
    problems += [
        problem
        for check in checks
        if not problems and is_judge(check) and (problem := _judge_problem(user, dataset.team_id, check))
    ]
    if problems:
        raise ValidationError({"checks": problems})
    setups = [_setup(user, dataset, version_id) for version_id in ids]
    items = dataset_version_items(dataset=dataset, version=dataset.version)
    count = items.count()
    if not count:
        raise ValidationError({"dataset": "The dataset has no items yet."})
    with transaction.atomic():
        experiment = Experiment.objects.create(
            team_id=dataset.team_id,
            created_by=user,
            name=(name.strip() or " vs ".join(_label(setup) for setup in setups))[:200],
            dataset=dataset,
            dataset_version=dataset.version,
            item_count=count,
            checks=checks,
        )
        for position, setup in enumerate(setups):
            target = ExperimentTarget.objects.create(
                experiment=experiment,
                position=position,
                label=_label(setup),
                preset_version_id=setup.version_id,
            )
            target.batch = _batch_draft(user, experiment, target, setup, items)
            target.save(update_fields=["batch"])
        experiment.estimate = experiment_preflight(experiment=experiment)
        experiment.save(update_fields=["estimate"])
    return experiment


def experiment_preflight(*, experiment: Experiment) -> dict[str, Any]:
    """The estimated cost of each target and in all (priced today), and why the budget refuses
    it ("" when it fits): the whole experiment's worst case must fit before anything is sent."""
    per_target, total, unpriced = [], Decimal(0), False
    estimates: list[BatchEstimate] = []
    for target in experiment.targets.select_related("batch"):
        estimate = batch_estimate_today(batch=target.batch) if target.batch else None
        if estimate is not None:
            estimates.append(estimate)
        per_target.append({"label": target.label, "cost": estimate.get("cost") if estimate else None})
    per_target += _judge_estimates(experiment, estimates)
    for row in per_target:
        if row["cost"] is None:
            unpriced = True
        else:
            total += Decimal(row["cost"])
    blocked = ""
    headroom = budget_headroom(team_id=experiment.team_id, user_id=experiment.created_by_id)
    if headroom is not None and headroom.refusal(total) is not None:
        blocked = (
            f"This experiment could cost up to {money(total)}; {money(headroom.remaining)} of "
            f"{headroom.whose} {money(headroom.limit)} budget remains this month. Nothing was sent: "
            "raise the limit on the Budgets page, or use fewer items or targets."
        )
    return {"cost": None if unpriced else str(total), "per_target": per_target, "blocked": blocked}


def experiment_start(*, user: User, experiment_id: int) -> Experiment:
    """Send it: every target's batch confirmed, priced by today's cards. Refused with nothing
    sent when the budget cannot cover the whole experiment's worst case."""
    experiment = _experiment_for_run(user, experiment_id)
    if experiment.started_at is not None:
        return experiment
    estimate = experiment_preflight(experiment=experiment)
    if estimate["blocked"]:
        raise ValidationError(estimate["blocked"])
    with transaction.atomic():
        experiment.estimate = estimate
        experiment.started_at = timezone.now()
        experiment.save(update_fields=["estimate", "started_at"])
        for batch_id in _batch_ids(experiment):
            batch_confirm(user=user, batch_id=batch_id)
    return experiment


def experiment_cancel(*, user: User, experiment_id: int) -> Experiment:
    """Stop what is not sent yet; what was answered stays, with its cost. A draft is discarded."""
    experiment = _experiment_for_run(user, experiment_id)
    if experiment.started_at is None:
        for batch_id in _batch_ids(experiment):
            batch_discard(user=user, batch_id=batch_id)
        experiment.delete()
        return experiment
    for batch_id in _batch_ids(experiment):
        batch_cancel(user=user, batch_id=batch_id)
    Experiment.objects.filter(pk=experiment.pk, cancelled_at__isnull=True).update(cancelled_at=timezone.now())
    experiment.refresh_from_db()
    return experiment


def experiment_nudge(*, experiment: Experiment) -> None:
    """Restart the chain of any target whose batch has visibly stalled (a worker died), and the
    scoring of a finished one left unscored: the page asks while it is watched, as the batch
    page does."""
    for batch in Batch.objects.filter(experiment_target__experiment=experiment, finished_at__isnull=True):
        batch_nudge_if_stalled(batch=batch)
    # A finished target's last answers are scored after its last step; if the worker died in
    # between (or a judge's lease lapsed), the worker is asked again.
    from playground.evals.tasks import experiment_target_score  # tasks import services, not back

    for target_id in experiment.targets.filter(batch__finished_at__isnull=False).values_list("pk", flat=True):
        if target_unscored(target_id=target_id):
            transaction.on_commit(partial(experiment_target_score.delay, target_id))


def _judge_estimates(experiment: Experiment, estimates: list[BatchEstimate]) -> list[dict[str, Any]]:
    """Each judge's worst case over every answer: its prompt with the item's input, expected
    output and the answer at the target's max_tokens (the batches' own token estimates), and a
    verdict of `JUDGE_MAX_TOKENS`, priced by today's card of the judge's model."""
    judges = [check for check in experiment.checks if is_judge(check)]
    if not judges:
        return []
    answers = experiment.item_count * len(estimates)
    expected = sum(len(text) for text in _version_items(experiment).values_list("expected", flat=True))
    rows = []
    for check in judges:
        prompt_chars = (len(str(check["prompt"])) + len(JUDGE_INSTRUCTION)) * answers + expected * len(
            estimates
        )
        tokens = estimate_tokens(prompt_chars) + sum(
            int(e.get("prompt_tokens", 0)) + int(e.get("output_tokens", 0)) for e in estimates
        )
        context = batch_context(
            team_id=experiment.team_id,
            user_id=experiment.created_by_id,
            connection_id=int(check["connection"]),
            model_id=str(check["model"]),
            preset_version_id=None,
            priced_on=None,
        )
        card = request_price_card(context=context)
        cost = worst_case_estimate(
            card=card, prompt_tokens=tokens, output_tokens=answers * JUDGE_MAX_TOKENS
        ).cost
        rows.append({"label": f"Judge: {check_label(check)}", "cost": None if cost is None else str(cost)})
    return rows


def _version_items(experiment: Experiment) -> Any:
    return dataset_version_items(dataset=experiment.dataset, version=experiment.dataset_version)


def _judge_problem(user: User, team_id: int, check: dict[str, Any]) -> str:
    """Why a judge check cannot run for this team ("" when it can): its connection must be one
    of the team's that the user may run."""
    runnable = connection_list_runnable(user=user).filter(team_id=team_id, pk=check["connection"])
    return (
        "" if runnable.exists() else f"The judge's connection {check['connection']} is not one of the team's."
    )


def _label(setup: PresetSetup) -> str:
    return f"{setup.preset_name} v{setup.version_number}"


def _setup(user: User, dataset: Dataset, version_id: int) -> PresetSetup:
    setup = preset_version_setup(user=user, version_id=version_id)
    if setup is None or setup.team_id != dataset.team_id or setup.connection.id is None:
        raise ValidationError(
            {"targets": "Choose versions of the dataset's team's presets whose connection exists."}
        )
    return setup


def _batch_draft(
    user: User, experiment: Experiment, target: ExperimentTarget, setup: PresetSetup, items: Any
) -> Batch:
    declared = {variable["name"] for variable in setup.variables}
    with tempfile.SpooledTemporaryFile(max_size=8_000_000) as stream:
        for item in items.iterator(chunk_size=1_000):
            stream.write(json.dumps(_line(item, declared)).encode() + b"\n")
        stream.seek(0)
        try:
            batch = batch_draft_create(
                user=user,
                connection_id=setup.connection.id or 0,
                model_id=setup.model_id,
                source=BatchInput(kind="jsonl", stream=stream),
                name=f"{experiment.name} · {target.label}",
                preset_version_id=setup.version_id,
            )
        except BatchInputInvalid as exc:
            # The batch's line N is the version's Nth item: say which item, and its upload line.
            refs = list(items.values_list("pk", "line"))
            named = [
                f"item {refs[e.line - 1][0]}: {e.message}" if e.line else e.message for e in exc.errors[:5]
            ]
            raise ValidationError(
                {"targets": [f"{target.label} cannot send {exc.error_count} item(s).", *named]}
            ) from None
    batch.record_tags = [f"experiment:{experiment.pk}", f"eval-target:{target.pk}"]
    batch.save(update_fields=["record_tags"])
    return batch


def _line(item: DatasetItem, declared: set[str]) -> dict[str, Any]:
    """The batch line of one item: its messages (or its input as the user's message), the values
    of the variables this target's preset declares, and its reference."""
    messages = item.messages or [{"role": "user", "content": item.input}]
    variables = {name: value for name, value in item.variables.items() if name in declared}
    return {
        "messages": messages,
        **({"variables": variables} if variables else {}),
        "external_reference": f"{ITEM_REFERENCE}{item.pk}",
    }


def _batch_ids(experiment: Experiment) -> list[int]:
    return [pk for pk in experiment.targets.values_list("batch_id", flat=True) if pk is not None]


def _experiment_for_run(user: User, experiment_id: int) -> Experiment:
    experiment = experiment_get(user=user, experiment_id=experiment_id)
    if experiment is None:
        raise ExperimentNotFound(experiment_id)
    require_run_role(user=user, team_id=experiment.team_id)
    return experiment
