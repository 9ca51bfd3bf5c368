"""Display of a comparison: its columns, its turns with each column's answer, the column totals
and the run history, ready to print.

The figures are the chat's (`presenters.usage`): tokens in / cached / out, the cost with the
card that priced it, TTFT and latency, and the schema check of a JSON answer. A column's
totals add up the records of its answers to the turns on screen (each turn's newest run);
what the reruns before them cost is said beside them. Pure functions over rows the compare
selectors loaded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth.base_user import AbstractBaseUser
from django.utils.safestring import SafeString

from playground.chat.compare.models import Comparison, ComparisonAnswer, ComparisonColumn, ComparisonTurn
from playground.chat.compare.selectors import (
    AnswerCells,
    comparison_answers,
    comparison_columns,
    comparison_turns,
)
from playground.chat.forms import connection_label
from playground.chat.presenters.messages import StructuredView, structured_view
from playground.chat.presenters.rendering import render_markdown
from playground.chat.presenters.usage import (
    NOT_REPORTED,
    SEPARATOR,
    UsageLine,
    cached_text,
    duration_text,
    status_label,
    usage_line,
)
from playground.usage.models import UsageRecord
from playground.usage.money import money

PARAMETER_LABELS = {
    "temperature": "temperature",
    "max_tokens": "max tokens",
    "top_p": "top p",
    "seed": "seed",
}


@dataclass(frozen=True)
class ColumnView:
    """A column's head: its target and settings, and whether it can continue as a conversation."""

    id: int
    comparison_id: int
    title: str  # "Target 1"
    model_id: str
    connection: str
    connection_deleted: bool
    settings: str  # "temperature 0.2 · affinity on"
    can_continue: bool
    continued_as: int | None


@dataclass(frozen=True)
class AnswerView:
    """One column's answer to one turn in one run."""

    id: int
    run: int
    html: SafeString
    calls: tuple[str, ...]  # the tools the answer called, by name
    structured: StructuredView | None
    usage: UsageLine | None
    refusal: str  # why nothing was sent
    pending: bool  # stored when its run started, not ended yet (streaming, or cut off)
    by: str
    when: dt.datetime


@dataclass(frozen=True)
class CellView:
    """A turn's answer in one column: the newest run's, and the runs before it."""

    key: str  # the DOM key of its streaming answer: answer-<key>-text
    turn_id: int
    column: ColumnView
    answer: AnswerView | None  # None: never run
    earlier: tuple[AnswerView, ...]

    @property
    def has_problem(self) -> bool:
        answer = self.answer
        return answer is not None and bool(answer.refusal or (answer.usage and not answer.usage.is_ok))


@dataclass(frozen=True)
class TurnView:
    id: int
    number: int
    content: str
    by: str
    when: dt.datetime
    cells: list[CellView]


@dataclass(frozen=True)
class ColumnTotals:
    """A column's foot: its answered turns' figures added up."""

    column: ColumnView
    turns: int  # answers with a record among the turns on screen
    tokens_in: str
    cached: str  # "1,200 cached (40%)": the cached share of all its prompt tokens
    tokens_out: str
    cost: str
    ttft: str  # the mean time to first token
    latency: str  # the answers' time added up
    all_runs_cost: str  # with every rerun's record; "" when there was none


@dataclass(frozen=True)
class ColumnResult:
    column: str  # "Target 1"
    status: str
    cost: str


@dataclass(frozen=True)
class RunView:
    """One row of the run history: a turn sent or rerun, when, by whom, and each column's result."""

    turn: int
    run: int
    what: str  # "Turn 2 sent", "Turn 2 rerun (run 2)"
    text: str
    by: str
    when: dt.datetime
    results: list[ColumnResult]


@dataclass(frozen=True)
class ComparisonView:
    columns: list[ColumnView]
    turns: list[TurnView]
    totals: list[ColumnTotals]
    history: list[RunView]

    def cell(self, *, turn_id: int, column_id: int) -> CellView:
        turn = next(turn for turn in self.turns if turn.id == turn_id)
        return next(cell for cell in turn.cells if cell.column.id == column_id)


def cell_key(turn_id: int, column_id: int) -> str:
    return f"t{turn_id}c{column_id}"


def comparison_view(
    *,
    columns: Sequence[ComparisonColumn],
    turns: Sequence[ComparisonTurn],
    answers: Iterable[ComparisonAnswer],
) -> ComparisonView:
    cells = AnswerCells(answers)
    heads = [column_view(column, cells=cells, turns=turns) for column in columns]
    return ComparisonView(
        columns=heads,
        turns=[turn_view(turn, columns=heads, cells=cells) for turn in turns],
        totals=[column_totals(head, cells=cells, turns=turns) for head in heads],
        history=run_history(turns=turns, columns=heads, cells=cells),
    )


def column_view(
    column: ComparisonColumn, *, cells: AnswerCells, turns: Sequence[ComparisonTurn]
) -> ColumnView:
    answered = any(
        (answer := cells.current(turn.pk, column.pk)) is not None
        and answer.usage_record_id is not None
        and bool(answer.content or answer.tool_calls)
        for turn in turns
    )
    return ColumnView(
        id=column.pk,
        comparison_id=column.comparison_id,
        title=f"Target {column.position + 1}",
        model_id=column.model_id,
        connection=connection_label(column.connection) if column.connection else "deleted connection",
        connection_deleted=column.connection_id is None,
        settings=target_settings(column),
        can_continue=answered and column.connection_id is not None,
        continued_as=column.continued_as_id,
    )


def turn_view(turn: ComparisonTurn, *, columns: Sequence[ColumnView], cells: AnswerCells) -> TurnView:
    return TurnView(
        id=turn.pk,
        number=turn.number,
        content=turn.content,
        by=_name(turn.user),
        when=turn.created_at,
        cells=[cell_view(turn.pk, column, cells=cells) for column in columns],
    )


def cell_view(turn_id: int, column: ColumnView, *, cells: AnswerCells) -> CellView:
    runs = [answer_view(answer) for answer in cells.runs(turn_id, column.id)]
    return CellView(
        key=cell_key(turn_id, column.id),
        turn_id=turn_id,
        column=column,
        answer=runs[-1] if runs else None,
        earlier=tuple(reversed(runs[:-1])),  # the newest first
    )


def answer_view(answer: ComparisonAnswer) -> AnswerView:
    record = answer.usage_record
    return AnswerView(
        id=answer.pk,
        run=answer.run,
        html=render_markdown(answer.content),
        calls=tuple(call.get("name", "") for call in answer.tool_calls),
        structured=structured_view(answer.content, answer.structured) if answer.structured else None,
        usage=usage_line(record) if record is not None else None,
        refusal=answer.refusal,
        pending=answer.ended_at is None,
        by=_name(answer.user),
        when=answer.created_at,
    )


def column_totals(column: ColumnView, *, cells: AnswerCells, turns: Sequence[ComparisonTurn]) -> ColumnTotals:
    current = [cells.current(turn.pk, column.id) for turn in turns]
    records = [answer.usage_record for answer in current if answer is not None and answer.usage_record]
    every = [
        answer.usage_record
        for turn in turns
        for answer in cells.runs(turn.pk, column.id)
        if answer.usage_record
    ]
    prompt = sum(record.prompt_tokens for record in records)
    reported = [record.cached_tokens for record in records if record.cached_tokens is not None]
    ttfts = [record.ttft_ms for record in records if record.ttft_ms is not None]
    latencies = [record.latency_ms for record in records if record.latency_ms is not None]
    return ColumnTotals(
        column=column,
        turns=len(records),
        tokens_in=f"{prompt:,} in",
        cached=cached_text(prompt_tokens=prompt, cached_tokens=sum(reported) if reported else None),
        tokens_out=f"{sum(record.completion_tokens for record in records):,} out",
        cost=_cost(records),
        ttft=f"{duration_text(round(sum(ttfts) / len(ttfts)))} mean" if ttfts else NOT_REPORTED,
        latency=duration_text(sum(latencies)) if latencies else NOT_REPORTED,
        all_runs_cost=_cost(every) if len(every) > len(records) else "",
    )


def run_history(
    *, turns: Sequence[ComparisonTurn], columns: Sequence[ColumnView], cells: AnswerCells
) -> list[RunView]:
    """Every run of every turn, newest first."""
    rows: list[RunView] = []
    for turn in turns:
        by_run: dict[int, dict[int, ComparisonAnswer]] = {}
        for column in columns:
            for answer in cells.runs(turn.pk, column.id):
                by_run.setdefault(answer.run, {})[column.id] = answer
        for run, answers in sorted(by_run.items()):
            first = min(answers.values(), key=lambda answer: answer.created_at)
            rows.append(
                RunView(
                    turn=turn.number,
                    run=run,
                    what=f"Turn {turn.number} sent" if run == 1 else f"Turn {turn.number} rerun (run {run})",
                    text=turn.content,
                    by=_name(first.user),
                    when=first.created_at,
                    results=[_result(column, answers.get(column.id)) for column in columns],
                )
            )
    return sorted(rows, key=lambda row: (row.turn, row.run), reverse=True)


def target_settings(column: ComparisonColumn) -> str:
    """The parameters a column sets, then its affinity: "temperature 0.2 · affinity on"."""
    parts = [
        f"{label} {column.parameters[name]}"
        for name, label in PARAMETER_LABELS.items()
        if column.parameters.get(name) is not None
    ]
    parts.append(f"affinity {'on' if column.use_affinity else 'off'}")
    return SEPARATOR.join(parts)


def _result(column: ColumnView, answer: ComparisonAnswer | None) -> ColumnResult:
    record = answer.usage_record if answer is not None else None
    if answer is None:
        status = "not run"
    elif record is not None:
        status = status_label(record.status, record.error_code)
    elif answer.refusal:
        status = "not sent"
    else:
        status = "no answer stored" if answer.ended_at is not None else "running"
    return ColumnResult(
        column=column.title, status=status, cost=_cost([record]) if record is not None else ""
    )


def _cost(records: Sequence[UsageRecord]) -> str:
    """The records' cost added up; "unpriced" where a model had no price card."""
    priced = [record.total_cost for record in records if record.price_card_id is not None]
    unpriced = len(records) - len(priced)
    if not priced:
        return "unpriced" if unpriced else money(Decimal(0))
    text = money(sum(priced, Decimal(0)))
    return f"{text} + {unpriced} unpriced" if unpriced else text


def _name(user: AbstractBaseUser | None) -> str:
    return user.get_username() if user is not None else "a former member"


def comparison_page(comparison: Comparison) -> ComparisonView:
    """A comparison read and presented whole (the caller checked access): its page, and what the
    socket sends again when a column or a run ends."""
    return comparison_view(
        columns=list(comparison_columns(comparison=comparison)),
        turns=comparison_turns(comparison=comparison),
        answers=comparison_answers(comparison=comparison),
    )
