"""Reads of comparisons, always scoped to the acting user's teams."""

from __future__ import annotations

from django.db.models import QuerySet

from playground.accounts.selectors import AnyUser
from playground.chat.compare.models import Comparison, ComparisonColumn

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
    """A comparison's columns with their targets and latest records (the caller checked access)."""
    return comparison.columns.select_related("connection", "usage_record", "usage_record__price_card").defer(
        "usage_record__request_body"
    )


def comparison_recent(*, user: AnyUser, limit: int = RECENT_COMPARISONS) -> list[Comparison]:
    """The newest comparisons of the user's teams."""
    if not user.is_authenticated:
        return []
    return list(
        Comparison.objects.filter(team__memberships__user_id=user.pk)
        .select_related("team")
        .prefetch_related("columns")
        .order_by("-created_at", "-id")[:limit]
    )
