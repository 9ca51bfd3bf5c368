"""A comparison's runs: its first turn, each next user message, and a rerun of the last turn.

A run sends one turn to every column at once. Each column's request is its own conversation
so far (`column_history`: the earlier turns with the column's own answers) then the turn's
message, built as a conversation with the column's settings would build it
(`comparison_request_build`). Each goes through the one metered call with path `compare` and
the source `compare-column:<id>:<attempt>`: it holds the team's budget (a column over budget
is refused on its own; the others still run), and its record is in the log and the dashboard
like any other.

The answers are stored when the run starts (`ComparisonAnswer`, one per column, the run's
number within its turn) and filled in when each call settles; a rerun adds the next run's
answers and keeps the earlier ones as history.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone

from playground.chat.compare.models import Comparison, ComparisonAnswer, ComparisonColumn, ComparisonTurn
from playground.chat.compare.selectors import AnswerCells, comparison_answers
from playground.chat.compare.services import comparison_for_run, comparison_request_build
from playground.chat.domain.tools import tool_call_record
from playground.chat.services.turns import message_text_check, require_fits_context
from playground.providers.adapters import ChatRequest, adapter_for
from playground.providers.answer_collector import AnswerCollector
from playground.providers.events import StreamEvent
from playground.providers.structured_answers import structured_check
from playground.usage.calls.call import MeteredCall
from playground.usage.calls.kinds import compare_column_call
from playground.usage.calls.settlement import Alone
from playground.usage.metering import Outcome
from playground.usage.models import UsageRecord

# An answer still unended after this long was cut off (the process stopped): it no longer holds
# the comparison's next run back.
RUN_STALE_AFTER = dt.timedelta(minutes=15)
STILL_RUNNING = "This comparison is still answering (in this or another tab): wait for its answers."
CONNECTION_DELETED = "This target's connection was deleted."


@dataclass
class ColumnRun:
    """One column's request of a run: `call` None when nothing could be sent (`answer.refusal`
    says why), else `events()` and then the stored answer."""

    comparison: Comparison
    column: ComparisonColumn
    answer: ComparisonAnswer
    call: MeteredCall | None
    collected: AnswerCollector = field(default_factory=AnswerCollector)

    def __post_init__(self) -> None:
        if self.call is not None:
            self.call.settlement = Alone(self._save_answer)

    async def events(self) -> AsyncGenerator[StreamEvent]:
        """The upstream's events; the metered call writes the record and then the column's answer."""
        assert self.call is not None
        async with aclosing(self.call.events()) as events:
            async for event in events:
                self.collected.observe(event)
                yield event

    def _save_answer(self, record: UsageRecord | None, outcome: Outcome) -> None:
        answer, tools = self.answer, self.comparison.tools
        answer.content, answer.reasoning = self.collected.text, self.collected.reasoning
        answer.tool_calls = [tool_call_record(call, tools) for call in self.collected.tool_calls]
        answer.structured = structured_check(
            text=self.collected.text, response_format=self.comparison.response_format
        )
        answer.usage_record, answer.ended_at = record, timezone.now()
        answer.save(
            update_fields=["content", "reasoning", "tool_calls", "structured", "usage_record", "ended_at"]
        )


@dataclass(frozen=True)
class TurnRun:
    """A run of one turn: every column's request. `new_turn`: the turn is new on the page;
    otherwise its answers are replaced there (the earlier ones become its history)."""

    turn: ComparisonTurn
    columns: list[ColumnRun]
    new_turn: bool = False


def comparison_run_start(*, user: User, comparison_id: int, first: bool = False) -> TurnRun | None:
    """Run the last turn again (Rerun), or, with `first`, the page's own start of turn 1 of a
    comparison never run; None then when it has run already (a reload, a second tab), so
    opening the page never sends it again. Blocking: call via `sync_to_async`.

    Raises `ComparisonNotFound`, `PermissionDenied` (viewers), `ValidationError` (still running).
    """
    comparison = comparison_for_run(user=user, comparison_id=comparison_id)
    with transaction.atomic():
        locked = _locked(comparison)
        if first and locked.runs:
            return None
        turn = comparison.turns.order_by("-number").first()
        assert turn is not None  # every comparison is stored with its turn 1
        return _turn_run(user=user, comparison=comparison, turn=turn)


def comparison_turn_send(*, user: User, comparison_id: int, text: str) -> TurnRun:
    """The user's next message, as the comparison's next turn sent to every column.
    Blocking: call via `sync_to_async`.

    Raises `ComparisonNotFound`, `PermissionDenied` (viewers), `ValidationError` (an empty,
    too long or unstorable message; a comparison never run or still running).
    """
    text = message_text_check(text)
    comparison = comparison_for_run(user=user, comparison_id=comparison_id)
    with transaction.atomic():
        if not _locked(comparison).runs:
            raise ValidationError("The first turn has not run yet: wait for its answers.")
        number = (comparison.turns.aggregate(last=Max("number"))["last"] or 0) + 1
        turn = ComparisonTurn.objects.create(comparison=comparison, number=number, content=text, user=user)
        return _turn_run(user=user, comparison=comparison, turn=turn, new_turn=True)


def _locked(comparison: Comparison) -> Comparison:
    """The comparison's row, locked for this run's transaction; refused while a run answers."""
    locked = Comparison.objects.select_for_update().get(pk=comparison.pk)
    pending = ComparisonAnswer.objects.filter(
        turn__comparison=comparison,
        ended_at__isnull=True,
        created_at__gte=timezone.now() - RUN_STALE_AFTER,
    )
    if pending.exists():
        raise ValidationError(STILL_RUNNING)
    return locked


def _turn_run(*, user: User, comparison: Comparison, turn: ComparisonTurn, new_turn: bool = False) -> TurnRun:
    """Store the run's answers (empty) and build each column's call, in the caller's transaction."""
    cells = AnswerCells(comparison_answers(comparison=comparison))
    earlier = list(comparison.turns.filter(number__lt=turn.number))
    run = 1 + max((answer.run for answer in turn.answers.all()), default=0)
    Comparison.objects.filter(pk=comparison.pk).update(runs=F("runs") + 1)
    columns = list(comparison.columns.select_for_update(of=("self",)).select_related("connection"))
    runs: list[ColumnRun] = []
    for column in columns:
        column.attempt += 1
        column.continued_as = None  # "Continue" now takes the new answers
        history = column_history(turns=earlier, cells=cells, column_id=column.pk)
        call, refusal = None, ""
        try:
            call = _column_call(
                user=user, comparison=comparison, column=column, history=history, text=turn.content
            )
        except ValidationError as exc:
            refusal = " ".join(exc.messages)
        answer = ComparisonAnswer.objects.create(
            turn=turn,
            column=column,
            run=run,
            user=user,
            refusal=refusal,
            ended_at=timezone.now() if refusal else None,
        )
        runs.append(ColumnRun(comparison, column, answer, call))
    ComparisonColumn.objects.bulk_update(columns, ["attempt", "continued_as"])
    return TurnRun(turn=turn, columns=runs, new_turn=new_turn)


def column_history(
    *, turns: Sequence[ComparisonTurn], cells: AnswerCells, column_id: int
) -> list[dict[str, Any]]:
    """A column's conversation so far: each of `turns` with the column's own answer to it (its
    newest run's). As in the chat's history, a turn whose answer failed (refused, an upstream
    error, stopped before any output) is left out with its message, and so is one that only
    called tools: nobody answers a comparison's tool calls, and an answer's text goes out
    without calls nobody answered."""
    messages: list[dict[str, Any]] = []
    for turn in turns:
        answer = cells.current(turn.pk, column_id)
        if answer is None or answer.is_failed or not answer.content:
            continue
        messages += [
            {"role": "user", "content": turn.content},
            {"role": "assistant", "content": answer.content},
        ]
    return messages


def column_request(
    *, comparison: Comparison, column: ComparisonColumn, history: list[dict[str, Any]], text: str
) -> ChatRequest:
    """The column's request for `text` after its `history`; `ValidationError` says why it cannot
    be sent (then nothing is). What a run sends, and what the pre-flight prices."""
    if column.connection is None:
        raise ValidationError(CONNECTION_DELETED)
    return comparison_request_build(comparison=comparison, column=column, history=history, text=text)


def _column_call(
    *,
    user: User,
    comparison: Comparison,
    column: ComparisonColumn,
    history: list[dict[str, Any]],
    text: str,
) -> MeteredCall:
    request = column_request(comparison=comparison, column=column, history=history, text=text)
    assert column.connection is not None
    return compare_column_call(
        adapter=adapter_for(column.connection),
        request=request,
        context_window=require_fits_context(request, column.connection),
        team_id=comparison.team_id,
        user_id=user.pk,
        connection_id=column.connection.pk,
        model_id=column.model_id,
        preset_version_id=comparison.preset_version_id,
        column_id=column.pk,
        attempt=column.attempt,
    )
