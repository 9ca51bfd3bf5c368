"""Scoring: each answered item's verdicts, stored once (`CheckResult`), so the results page reads
rows instead of running every check on every view.

`target_score` runs in the worker after each step of a target's batch (`evals.tasks`, started
by the step's `task_postrun`) and from `manage.py evals_score` for experiments answered before
verdicts were stored. It writes the fixed checks' verdicts of every answered item without any
(a unique row per item and check: a second run writes nothing twice), and a pending row per
judge check, then judges a few pending rows. A judge's call is the one metered call (the
batch item's builder: the team's budget held as it is sent, its record and its verdict written
together), priced today, its record tagged `experiment-judge:<experiment>` and
`judge-target:<target>` (shown apart from the experiment's own cost), its source
`eval-judge:<row>:<attempt>`. A judge that answers no usable score, an upstream error or a
refused budget is a row with no score and the reason: the experiment goes on.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from playground.batches.models import BatchItem, ItemState
from playground.evals.checks import (
    JUDGE_MAX_TOKENS,
    JUDGE_PASS_AT,
    JUDGE_SCHEMA,
    Verdict,
    check_run,
    is_judge,
    judge_messages,
    judge_verdict,
)
from playground.evals.models import ITEM_REFERENCE, CheckResult, DatasetItem, ExperimentTarget
from playground.lib.asyncutil import run_on_one_loop
from playground.providers.adapters import ChatAdapter, ChatRequest, adapter_for
from playground.providers.answer_collector import AnswerCollector
from playground.providers.context_windows import context_window_for
from playground.providers.models import ProviderConnection
from playground.usage.calls.kinds import batch_context, batch_item_call
from playground.usage.metering import Outcome
from playground.usage.models import UsageRecord, UsageStatus
from playground.usage.sources import source_string

logger = logging.getLogger(__name__)

SCORE_PAGE = 500  # answered items scored per query
JUDGE_ROUND = 8  # judge calls one task makes at once, before it hands over to the next
JUDGE_SOURCE = "eval-judge"
JUDGE_ATTEMPTS = 3  # tries of a judge call whose verdict could not be stored (not upstream errors)
JUDGE_WAITING = "Waiting for the judge."


def judge_tags(*, experiment_id: int, target_id: int) -> tuple[str, str]:
    """What a judge call's record is tagged with: its experiment's and its target's judging."""
    return f"experiment-judge:{experiment_id}", f"judge-target:{target_id}"


def target_score(*, target_id: int) -> bool:
    """Store the verdicts of the target's answered items that have none, then judge a round of
    pending rows. True when judge rows still wait (another round is due)."""
    target = ExperimentTarget.objects.select_related("experiment").filter(pk=target_id).first()
    if target is None or target.batch_id is None or not target.experiment.checks:
        return False
    while _score_page(target):
        pass
    if not any(is_judge(check) for check in target.experiment.checks):
        return False  # no judge rows to look for: this runs after every step of the batch
    return run_on_one_loop(_judge_round, target)


def target_unscored(*, target_id: int) -> bool:
    """Whether the target has answered items without verdicts, or judge rows nobody is judging."""
    target = ExperimentTarget.objects.select_related("experiment").filter(pk=target_id).first()
    if target is None or target.batch_id is None or not target.experiment.checks:
        return False
    return _unscored(target).exists() or _claimable(target).exists()


def _unscored(target: ExperimentTarget) -> QuerySet[BatchItem]:
    scored = CheckResult.objects.filter(batch_item=OuterRef("pk"))
    return BatchItem.objects.filter(batch_id=target.batch_id or 0, state=ItemState.DONE).filter(
        ~Exists(scored)
    )


def _claimable(target: ExperimentTarget) -> QuerySet[CheckResult]:
    return CheckResult.objects.filter(target=target, judged_at__isnull=True).filter(
        Q(lease_until__isnull=True) | Q(lease_until__lt=timezone.now())
    )


def _score_page(target: ExperimentTarget) -> bool:
    """One page of answered items without verdicts, scored; True when the page was full (more
    may wait). Items answered after its query are scored after the step that answered them."""
    items = list(
        _unscored(target).order_by("index").only("pk", "index", "response", "external_reference")[:SCORE_PAGE]
    )
    if not items:
        return False
    expected = _expected(items)
    rows = []
    for item in items:
        answer = (item.response or {}).get("text") or ""
        for position, check in enumerate(target.experiment.checks):
            if is_judge(check):
                verdict, judged_at = Verdict(None, JUDGE_WAITING), None
            else:
                verdict = check_run(check, answer=answer, expected=expected.get(item.external_reference, ""))
                judged_at = timezone.now()
            rows.append(
                CheckResult(
                    target=target,
                    batch_item=item,
                    index=item.index,
                    position=position,
                    score=verdict.score,
                    passed=verdict.passed,
                    reason=verdict.reason,
                    judged_at=judged_at,
                )
            )
    CheckResult.objects.bulk_create(rows, ignore_conflicts=True)
    return len(items) == SCORE_PAGE


def _expected(items: list[BatchItem]) -> dict[str, str]:
    ids = [
        int(ref.removeprefix(ITEM_REFERENCE))
        for ref in {i.external_reference for i in items}
        if ref.startswith(ITEM_REFERENCE)
    ]
    return {
        f"{ITEM_REFERENCE}{pk}": text
        for pk, text in DatasetItem.objects.filter(pk__in=ids).values_list("pk", "expected")
    }


@dataclass(frozen=True)
class _Judging:
    """One claimed row and everything its call needs, read before the calls start."""

    row: CheckResult
    check: Mapping[str, Any]
    request: ChatRequest | None  # None: nothing can be sent (`problem` says why)
    problem: str = ""
    item_tag: str = ""  # the answer's dataset item (`eval-item:<id>`), tagged on the record


def _judge_round(target: ExperimentTarget) -> bool:
    claimed = _claim(target)
    if not claimed:
        return False
    adapters: dict[int, ChatAdapter | str] = {}
    windows: dict[tuple[int, str], int | None] = {}
    jobs = []
    for row in claimed:
        check = target.experiment.checks[row.position]
        connection = _connection(target, check)
        if connection is None:
            jobs.append(_Judging(row, check, None, "The judge's connection is gone or not the team's."))
            continue
        if connection.pk not in adapters:
            try:
                adapters[connection.pk] = adapter_for(connection)
            except ValidationError as exc:
                adapters[connection.pk] = " ".join(exc.messages)
            key = (connection.pk, str(check["model"]))
            found = context_window_for(connection=connection, model_id=key[1], day=timezone.now().date())
            windows[key] = found.tokens if found is not None else None
        adapter = adapters[connection.pk]
        if isinstance(adapter, str):
            jobs.append(_Judging(row, check, None, f"The judge's connection cannot be used: {adapter}"))
            continue
        request, item_tag = _judge_request(row, check)
        jobs.append(_Judging(row, check, request, item_tag=item_tag))
    async_to_sync(_judge_all)(target, jobs, adapters, windows)
    return _claimable(target).exists()


def _claim(target: ExperimentTarget) -> list[CheckResult]:
    """Up to a round of pending judge rows, each leased to this task and given its next attempt."""
    lease = dt.timedelta(seconds=settings.UPSTREAM_TOTAL_TIMEOUT + 60)
    claimed = []
    for row in _claimable(target).order_by("index", "position")[:JUDGE_ROUND]:
        free = Q(lease_until__isnull=True) | Q(lease_until__lt=timezone.now())
        taken = CheckResult.objects.filter(
            free, pk=row.pk, attempt=row.attempt, judged_at__isnull=True
        ).update(lease_until=timezone.now() + lease, attempt=row.attempt + 1)
        if taken:
            row.attempt += 1
            claimed.append(row)
    return claimed


def _connection(target: ExperimentTarget, check: Mapping[str, Any]) -> ProviderConnection | None:
    return ProviderConnection.objects.filter(
        pk=int(check.get("connection") or 0), team_id=target.experiment.team_id
    ).first()


def _judge_request(row: CheckResult, check: Mapping[str, Any]) -> tuple[ChatRequest, str]:
    """The judge's request for the row's answer, and the answer's item tag."""
    item = BatchItem.objects.only("response", "external_reference").get(pk=row.batch_item_id)
    reference = item.external_reference.removeprefix(ITEM_REFERENCE)
    dataset_item = DatasetItem.objects.filter(pk=int(reference)).first() if reference.isdigit() else None
    input_text = ""
    if dataset_item is not None:
        input_text = (
            str(dataset_item.messages[-1].get("content", "")) if dataset_item.messages else dataset_item.input
        )
    request = ChatRequest(
        model=str(check["model"]),
        messages=judge_messages(
            check,
            input_text=input_text,
            answer=(item.response or {}).get("text") or "",
            expected=dataset_item.expected if dataset_item else "",
        ),
        max_tokens=JUDGE_MAX_TOKENS,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "verdict", "schema": JUDGE_SCHEMA}},
        stream=False,
    )
    return request, item.external_reference


async def _judge_all(
    target: ExperimentTarget,
    jobs: list[_Judging],
    adapters: Mapping[int, ChatAdapter | str],
    windows: Mapping[tuple[int, str], int | None],
) -> None:
    calls = (_judge_one(target, job, adapters, windows) for job in jobs)
    for job, failure in zip(jobs, await asyncio.gather(*calls, return_exceptions=True), strict=True):
        if isinstance(failure, BaseException):  # e.g. the database was busy: judged again, a few times
            logger.error(
                "experiment %s: a judge call failed unexpectedly", target.experiment_id, exc_info=failure
            )
            await sync_to_async(_release)(job, failure)


async def _judge_one(
    target: ExperimentTarget,
    job: _Judging,
    adapters: Mapping[int, ChatAdapter | str],
    windows: Mapping[tuple[int, str], int | None],
) -> None:
    pass_at = float(job.check.get("pass_at", JUDGE_PASS_AT))
    if job.request is None:
        await _save(job.row, Verdict(None, job.problem, pass_at), None)
        return
    adapter = adapters[int(job.check["connection"])]
    assert not isinstance(adapter, str)
    experiment = target.experiment
    answer = AnswerCollector()

    def keep(record: UsageRecord | None, outcome: Outcome) -> None:
        if outcome.status == UsageStatus.OK and answer.error is None:
            verdict = judge_verdict(job.check, answer.text)
        else:
            why = outcome.error_text or outcome.status
            verdict = Verdict(None, f"The judge's call failed: {why[:300]}", pass_at)
        _save_now(job.row, verdict, record)

    call = batch_item_call(
        adapter=adapter,
        request=job.request,
        context=batch_context(
            team_id=experiment.team_id,
            user_id=experiment.created_by_id,
            connection_id=int(job.check["connection"]),
            model_id=job.request.model,
            preset_version_id=None,
            priced_on=None,
            source=source_string(JUDGE_SOURCE, job.row.pk, job.row.attempt),
            tags=(*judge_tags(experiment_id=experiment.pk, target_id=target.pk), job.item_tag),
        ),
        context_window=windows.get((int(job.check["connection"]), job.request.model)),
        keep=keep,
        held_by_caller=False,
    )
    await call.collect(answer)


async def _save(row: CheckResult, verdict: Verdict, record: UsageRecord | None) -> None:
    await sync_to_async(_save_now)(row, verdict, record)


def _release(job: _Judging, failure: BaseException) -> None:
    """A judge call that ended without its verdict stored: its row is judged again by the next
    round (a new attempt, a new record), up to `JUDGE_ATTEMPTS`; then it says why it has none."""
    if job.row.attempt < JUDGE_ATTEMPTS:
        CheckResult.objects.filter(pk=job.row.pk, attempt=job.row.attempt, judged_at__isnull=True).update(
            lease_until=None
        )
        return
    pass_at = float(job.check.get("pass_at", JUDGE_PASS_AT))
    reason = f"The judge's verdict could not be stored after {JUDGE_ATTEMPTS} tries: {failure}"[:500]
    _save_now(job.row, Verdict(None, reason, pass_at), None)


def _save_now(row: CheckResult, verdict: Verdict, record: UsageRecord | None) -> None:
    CheckResult.objects.filter(pk=row.pk, attempt=row.attempt, judged_at__isnull=True).update(
        score=verdict.score,
        passed=verdict.passed,
        reason=verdict.reason,
        judged_at=timezone.now(),
        lease_until=None,
        usage_record=record,
    )
