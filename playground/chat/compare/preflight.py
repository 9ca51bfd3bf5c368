"""A comparison's pre-flight: what the next message would cost in each column, and in all.

Each column's figures are the chat's (`chat.services.preflight.request_preflight`) for the
request the column would send (its own history, then the draft, `runs.column_request`): at
most, expected from the column's own answered requests (else the team's chat turns on its
model this week), and whether the budget would refuse it, which it then does alone. The
columns are held at once, so the total says when they fit one by one but not together. The
form prices the first turn the same way before the comparison is stored (`draft_preflight`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError

from playground.chat.compare.models import Comparison, ComparisonColumn
from playground.chat.compare.runs import column_history, column_request
from playground.chat.compare.selectors import AnswerCells, comparison_answers, comparison_columns
from playground.chat.compare.services import ComparisonDraft
from playground.chat.selectors import UsageSoFar
from playground.chat.services.preflight import Preflight, request_preflight
from playground.usage.budgets import Headroom, budget_headroom
from playground.usage.pricing import ZERO


@dataclass(frozen=True)
class ColumnPreflight:
    column: ComparisonColumn
    figures: Preflight | None  # None: the request cannot be built (`problem` says why)
    problem: str = ""

    @property
    def refused(self) -> bool:
        """Send will refuse this column (and send the others)."""
        figures = self.figures
        return figures is None or figures.budget_refusal is not None or figures.over_window


@dataclass(frozen=True)
class ComparisonPreflight:
    columns: list[ColumnPreflight]
    headroom: Headroom | None  # the tightest budget the sender's requests are held on; None: no limit

    @property
    def at_most(self) -> Decimal | None:
        """The most the columns that would be sent may cost together; None when one is unpriced."""
        return self._total([figures.at_most.cost for figures in self._sent()])

    @property
    def expected(self) -> Decimal | None:
        return self._total([figures.expected.cost for figures in self._sent()])

    @property
    def over_together(self) -> bool:
        """Each column fits the budget alone but not all together: the last held may be refused."""
        total = self.at_most
        return self.headroom is not None and total is not None and self.headroom.refusal(total) is not None

    def _sent(self) -> list[Preflight]:
        return [
            column.figures for column in self.columns if column.figures is not None and not column.refused
        ]

    @staticmethod
    def _total(costs: list[Decimal | None]) -> Decimal | None:
        if any(cost is None for cost in costs):
            return None
        return sum((cost for cost in costs if cost is not None), ZERO)


NO_TURNS = UsageSoFar(turns=0, prompt_tokens=0, cached_tokens=0, completion_tokens=0)
# A column, its history before the draft, and what its own answered requests used.
ColumnSetup = tuple[ComparisonColumn, list[dict[str, Any]], UsageSoFar]


def comparison_preflight(*, comparison: Comparison, sender_id: int, text: str) -> ComparisonPreflight:
    """The next turn's figures for the draft `text`, per column, sent by `sender_id` (whose
    budget it is held on). The caller checked access."""
    cells = AnswerCells(comparison_answers(comparison=comparison))
    turns = list(comparison.turns.all())
    columns = [
        (column, column_history(turns=turns, cells=cells, column_id=column.pk), cells.column_usage(column.pk))
        for column in comparison_columns(comparison=comparison)
    ]
    return _preflight(comparison=comparison, columns=columns, sender_id=sender_id, text=text)


def draft_preflight(*, draft: ComparisonDraft, sender_id: int) -> ComparisonPreflight:
    """The first turn's figures, on the form, before the comparison is stored: each column's
    request has no history and nothing of its own to expect from."""
    columns: list[ColumnSetup] = [(column, [], NO_TURNS) for column in draft.columns]
    return _preflight(
        comparison=draft.comparison, columns=columns, sender_id=sender_id, text=draft.comparison.prompt
    )


def _preflight(
    *,
    comparison: Comparison,
    columns: list[ColumnSetup],
    sender_id: int,
    text: str,
) -> ComparisonPreflight:
    """Each column's figures for `text` after its history, expected from its own usage so far."""
    items: list[ColumnPreflight] = []
    for column, history, own in columns:
        try:
            request = column_request(comparison=comparison, column=column, history=history, text=text.strip())
        except ValidationError as exc:
            items.append(ColumnPreflight(column, None, " ".join(exc.messages)))
            continue
        figures = request_preflight(
            request=request,
            connection=column.connection,
            team_id=comparison.team_id,
            sender_id=sender_id,
            own=own,
        )
        items.append(ColumnPreflight(column, figures))
    return ComparisonPreflight(items, budget_headroom(team_id=comparison.team_id, user_id=sender_id))
