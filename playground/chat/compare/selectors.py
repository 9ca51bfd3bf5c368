"""Reads of comparisons, always scoped to the acting user's teams."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, F, QuerySet, Value
from django.db.models.functions import Greatest

from playground.accounts.selectors import AnyUser
from playground.chat.compare.models import Comparison, ComparisonAnswer, ComparisonColumn, ComparisonTurn
from playground.chat.selectors import UsageSoFar
from playground.usage.models import UsageStatus

RECENT_COMPARISONS = 10


def comparison_get(*, user: AnyUser, comparison_id: int) -> Comparison | None:
    """The comparison if one of the user's teams owns it; None otherwise (callers answer 404)."""
    if not user.is_authenticated:
        return None
    return (
        Comparison.objects.filter(team__memberships__user_id=user.pk, pk=comparison_id)
        .select_related("team", "conversation")
        .first()
    )


async def acomparison_get(*, user: AnyUser, comparison_id: int) -> Comparison | None:
    if not user.is_authenticated:
        return None
    return await Comparison.objects.filter(team__memberships__user_id=user.pk, pk=comparison_id).afirst()


def comparison_columns(*, comparison: Comparison) -> QuerySet[ComparisonColumn]:
    """A comparison's columns with their targets (the caller checked access)."""
    return comparison.columns.select_related("connection")


def comparison_turns(*, comparison: Comparison) -> list[ComparisonTurn]:
    """A comparison's user messages, first to last, with who sent them (the caller checked access)."""
    return list(comparison.turns.select_related("user"))


def comparison_answers(*, comparison: Comparison) -> list[ComparisonAnswer]:
    """Every answer of every column to every turn, each run's, with its record (the caller
    checked access)."""
    return list(
        ComparisonAnswer.objects.filter(turn__comparison=comparison)
        .select_related("user", "usage_record", "usage_record__price_card")
        .defer("usage_record__request_body")
    )


class AnswerCells:
    """Answers by cell (a turn and a column), each cell's runs oldest first."""

    def __init__(self, answers: Iterable[ComparisonAnswer]) -> None:
        self.cells: dict[tuple[int, int], list[ComparisonAnswer]] = {}
        for answer in sorted(answers, key=lambda answer: answer.run):
            self.cells.setdefault((answer.turn_id, answer.column_id), []).append(answer)

    def runs(self, turn_id: int, column_id: int) -> list[ComparisonAnswer]:
        return self.cells.get((turn_id, column_id), [])

    def current(self, turn_id: int, column_id: int) -> ComparisonAnswer | None:
        """The newest run's answer: the column's answer to the turn, which its next turns send."""
        runs = self.runs(turn_id, column_id)
        return runs[-1] if runs else None

    def column_usage(self, column_id: int) -> UsageSoFar:
        """What the column's answered requests used, every run's (the pre-flight's "expected")."""
        records = [
            answer.usage_record
            for (_, column), runs in self.cells.items()
            if column == column_id
            for answer in runs
            if answer.usage_record is not None and answer.usage_record.status == UsageStatus.OK
        ]
        return UsageSoFar(
            turns=len(records),
            prompt_tokens=sum(record.prompt_tokens for record in records),
            cached_tokens=sum(record.cached_tokens or 0 for record in records),
            completion_tokens=sum(record.completion_tokens for record in records),
        )


def comparison_recent(*, user: AnyUser, limit: int = RECENT_COMPARISONS) -> list[Comparison]:
    """The newest comparisons of the user's teams, each with its number of turns (`turn_count`)
    and of reruns (`reruns`: runs started beyond one per turn)."""
    if not user.is_authenticated:
        return []
    return list(
        Comparison.objects.filter(team__memberships__user_id=user.pk)
        .select_related("team")
        .prefetch_related("columns")
        .annotate(turn_count=Count("turns", distinct=True))
        .annotate(reruns=Greatest(F("runs") - F("turn_count"), Value(0)))
        .order_by("-created_at", "-id")[:limit]
    )
