"""Experiments: a dataset version's items sent to each target as one batch.

A target is a preset version (its connection, model and settings), or a connection target: a
connection's model with the parameters and system prompt chosen on the form, as a Compare
column. An item's plain messages go to either as they are; an item's input goes as the user's
message after the target's system prompt, whose {{variables}} the item's variables fill (a
preset's declared ones, or those a connection target's system prompt uses). An item that
leaves a used variable without a value is refused by the pre-flight, naming the item; items'
variables a target does not use are said in the pre-flight's notes (docs/guide/evaluations.md).

Each target is an ordinary batch (`batches.services`): the same input checks and estimate, the
same budget hold per item, the same chain of Celery steps (resumed by the watchdog or the nudge
after a worker dies; an item's record and result commit together under a unique source, so
nothing is recorded twice) and the same usage records, tagged `experiment:<id>`,
`eval-target:<id>` and `eval-item:<dataset item id>` (`Batch.record_tags`). An experiment is a
draft with its pre-flight until the user starts it; starting is refused, with nothing sent,
when the budget cannot cover the whole experiment's worst case.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from playground.accounts.permissions import require_run_role
from playground.batches.inputs import Shared
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
from playground.chat.domain.composer import parameters_check
from playground.chat.forms import SYSTEM_PROMPT_MAX_CHARS
from playground.evals.checks import JUDGE_INSTRUCTION, JUDGE_MAX_TOKENS, check_label, check_problem, is_judge
from playground.evals.models import (
    ITEM_REFERENCE,
    Dataset,
    DatasetItem,
    Experiment,
    ExperimentTarget,
    TargetKind,
)
from playground.evals.selectors import dataset_get, dataset_version_items, experiment_get
from playground.evals.services.scoring import target_unscored
from playground.lib.storable import is_storable
from playground.presets.selectors import preset_version_setup
from playground.presets.variables import variables_declared
from playground.providers.model_ids import model_id_validate
from playground.providers.models import ProviderConnection
from playground.providers.request_rules import request_capabilities
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


@dataclass(frozen=True)
class ConnectionTarget:
    """A target as a Compare column names one: a connection's model, the parameters chosen
    (unset ones `None`; checked against the model) and a system prompt, whose {{variables}}
    each item's variables fill."""

    connection_id: int
    model_id: str
    parameters: dict[str, Any] = field(default_factory=dict)
    system_prompt: str = ""


@dataclass(frozen=True)
class _Plan:
    """A target checked, before its batch is drafted: where it sends, with what settings."""

    kind: str
    label: str
    connection_id: int
    model_id: str
    preset_version_id: int | None = None
    shared: Shared = field(default_factory=Shared)  # a connection target's settings
    declared: frozenset[str] = frozenset()  # the variables its prompt uses
    parameters: dict[str, Any] = field(default_factory=dict)
    system_prompt: str = ""


def experiment_create(
    *,
    user: User,
    dataset_id: int,
    checks: list[dict[str, Any]],
    preset_version_ids: Sequence[int] = (),
    connection_targets: Sequence[ConnectionTarget] = (),
    name: str = "",
) -> Experiment:
    """A draft: one batch draft per target over the dataset's newest version, and the pre-flight.

    The targets are the preset versions, then the connection targets, in the order given: the
    first is the baseline. Refused (`ValidationError`) for a dataset without items, a version
    or connection another team owns (or one the user may not run), parameters the model does not
    take, a check that cannot run, or items a target cannot send (each named by its dataset line)."""
    dataset = dataset_get(user=user, dataset_id=dataset_id)
    if dataset is None:
        raise ExperimentNotFound(dataset_id)
    require_run_role(user=user, team_id=dataset.team_id)
    ids = list(dict.fromkeys(preset_version_ids))
    if not 1 <= len(ids) + len(connection_targets) <= MAX_TARGETS:
        raise ValidationError(
            {"targets": f"Choose 1 to {MAX_TARGETS} targets: preset versions or connection targets."}
        )
    problems = [problem for check in checks if (problem := check_problem(check))]
    problems += [
        problem
        for check in checks
        if not problems and is_judge(check) and (problem := _judge_problem(user, dataset.team_id, check))
    ]
    if problems:
        raise ValidationError({"checks": problems})
    plans = [_preset_plan(user, dataset, version_id) for version_id in ids]
    plans += _connection_plans(user, dataset, connection_targets, first=len(plans))
    plans = _distinct_labels(plans)
    items = dataset_version_items(dataset=dataset, version=dataset.version)
    count = items.count()
    if not count:
        raise ValidationError({"dataset": "The dataset has no items yet."})
    with transaction.atomic():
        experiment = Experiment.objects.create(
            team_id=dataset.team_id,
            created_by=user,
            name=(name.strip() or " vs ".join(plan.label for plan in plans))[:200],
            dataset=dataset,
            dataset_version=dataset.version,
            item_count=count,
            checks=checks,
        )
        notes = []
        for position, plan in enumerate(plans):
            target = ExperimentTarget.objects.create(
                experiment=experiment,
                position=position,
                kind=plan.kind,
                label=plan.label,
                preset_version_id=plan.preset_version_id,
                connection_id=None if plan.preset_version_id else plan.connection_id,
                model_id="" if plan.preset_version_id else plan.model_id,
                parameters=plan.parameters,
                system_prompt=plan.system_prompt,
            )
            target.batch, unused = _batch_draft(user, experiment, target, plan, items)
            target.save(update_fields=["batch"])
            if unused:
                notes.append(_unused_note(plan, unused))
        experiment.estimate = {"notes": notes}
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
    return {
        "cost": None if unpriced else str(total),
        "per_target": per_target,
        "blocked": blocked,
        "notes": experiment.estimate.get("notes", []),  # said when it was made (`_unused_note`)
    }


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


def _preset_plan(user: User, dataset: Dataset, version_id: int) -> _Plan:
    setup = preset_version_setup(user=user, version_id=version_id)
    if setup is None or setup.team_id != dataset.team_id or setup.connection.id is None:
        raise ValidationError(
            {"targets": "Choose versions of the dataset's team's presets whose connection exists."}
        )
    return _Plan(
        kind=TargetKind.PRESET_VERSION,
        label=f"{setup.preset_name} v{setup.version_number}",
        connection_id=setup.connection.id or 0,
        model_id=setup.model_id,
        preset_version_id=setup.version_id,
        declared=frozenset(variable["name"] for variable in setup.variables),
    )


def _connection_plans(
    user: User, dataset: Dataset, targets: Sequence[ConnectionTarget], *, first: int
) -> list[_Plan]:
    """Each connection target checked as a Compare column is: a connection of the dataset's
    team that the user may run, a model id fit to send, and parameters the model takes. Every
    problem of every target is said at once, each naming its target."""
    runnable = {
        connection.pk: connection
        for connection in connection_list_runnable(user=user).filter(team_id=dataset.team_id)
    }
    today = timezone.now().date()
    plans, errors = [], []
    for number, target in enumerate(targets, start=first + 1):
        connection = runnable.get(target.connection_id)
        model_id = target.model_id.strip()
        where = f"Target {number} ({model_id or 'no model'})"
        if connection is None:
            errors.append(f"{where}: choose a connection of the dataset's team that you may run.")
            continue
        try:
            model_id_validate(model_id)
            caps = request_capabilities(connection=connection, model_id=model_id, day=today)
            parameters = parameters_check(caps=caps, parameters=target.parameters)
        except ValidationError as exc:
            errors += [f"{where}: {message}" for message in _messages(exc)]
            continue
        prompt = target.system_prompt.strip()
        if len(prompt) > SYSTEM_PROMPT_MAX_CHARS or not is_storable(prompt):
            errors.append(
                f"{where}: the system prompt must be at most {SYSTEM_PROMPT_MAX_CHARS:,} characters, "
                "none of them NUL or a lone surrogate."
            )
            continue
        variables = tuple(variables_declared([], [prompt]))
        plans.append(
            _Plan(
                kind=TargetKind.CONNECTION,
                label=connection_target_label(connection, model_id, parameters),
                connection_id=connection.pk,
                model_id=model_id,
                shared=Shared(system_prompt=prompt, fields=parameters, variables=variables),
                declared=frozenset(variable.name for variable in variables),
                parameters=parameters,
                system_prompt=prompt,
            )
        )
    if errors:
        raise ValidationError({"targets": errors})
    return plans


def connection_target_label(connection: ProviderConnection, model_id: str, parameters: dict[str, Any]) -> str:
    """ "kimi-k2.5 @ Workers AI, t=0.2, max 200 tokens": the model's own name (its id after the
    last slash), the connection's name and the parameters chosen."""
    parts = [f"{model_id.rsplit('/', 1)[-1]} @ {connection.name}"]
    if parameters.get("temperature") is not None:
        parts.append(f"t={parameters['temperature']:g}")
    if parameters.get("max_tokens") is not None:
        parts.append(f"max {parameters['max_tokens']} tokens")
    return ", ".join(parts)[:180]


def _distinct_labels(plans: list[_Plan]) -> list[_Plan]:
    """Two targets with the same label (one model twice, with two system prompts) are told apart
    by their place, as the results, the exports and the winner line name targets by label."""
    seen: set[str] = set()
    out = []
    for position, plan in enumerate(plans, start=1):
        label = plan.label if plan.label not in seen else f"{plan.label} (#{position})"
        seen.add(label)
        out.append(dataclasses.replace(plan, label=label))
    return out


def _unused_note(plan: _Plan, unused: set[str]) -> str:
    names = ", ".join(sorted(unused))
    if plan.kind == TargetKind.CONNECTION:
        return (
            f"{plan.label}: its system prompt does not use the items' variables ({names}), so their "
            "values are not sent to it; write them into it as {{name}} to send them."
        )
    return f"{plan.label}: its preset does not declare the items' variables ({names}); they are not sent."


def _messages(exc: ValidationError) -> list[str]:
    if hasattr(exc, "error_dict"):
        return [
            f"{name.replace('_', ' ')}: {message}" if name != "__all__" else message
            for name, messages in exc.message_dict.items()
            for message in messages
        ]
    return list(exc.messages)


def _batch_draft(
    user: User, experiment: Experiment, target: ExperimentTarget, plan: _Plan, items: Any
) -> tuple[Batch, set[str]]:
    """The target's batch draft, and the names of the items' variables its prompt does not use."""
    unused: set[str] = set()
    with tempfile.SpooledTemporaryFile(max_size=8_000_000) as stream:
        for item in items.iterator(chunk_size=1_000):
            unused.update(name for name in item.variables if name not in plan.declared)
            stream.write(json.dumps(_line(item, plan.declared)).encode() + b"\n")
        stream.seek(0)
        try:
            batch = batch_draft_create(
                user=user,
                connection_id=plan.connection_id,
                model_id=plan.model_id,
                source=BatchInput(kind="jsonl", stream=stream, shared=plan.shared),
                name=f"{experiment.name} · {target.label}",
                preset_version_id=plan.preset_version_id,
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
        except ValidationError as exc:  # the connection's model list refuses the model
            raise ValidationError({"targets": [f"{target.label}: {m}" for m in _messages(exc)]}) from None
    batch.record_tags = [f"experiment:{experiment.pk}", f"eval-target:{target.pk}"]
    batch.save(update_fields=["record_tags"])
    return batch, unused


def _line(item: DatasetItem, declared: frozenset[str]) -> dict[str, Any]:
    """The batch line of one item: its messages (or its input as the user's message), the values
    of the variables this target's prompt declares, and its reference."""
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
