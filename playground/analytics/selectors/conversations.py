"""The conversation charts: the costliest conversations of the period, and how prompts grow over a session."""

from __future__ import annotations

from typing import Any

from django.db.models import F, Q, QuerySet, Sum

from playground.analytics.filters import Filters
from playground.analytics.selectors.rollups import bucket_floor, usd
from playground.usage.models import UsageConversationDaily, UsageConversationTotal, UsageRecord
from playground.usage.sources import CONVERSATION, SourceKey, source_links

TOP_CONVERSATIONS = 10
GROWTH_SESSIONS = 5
GROWTH_TURNS = 200
MAX_STRADDLERS = 1000


def top_conversations(filters: Filters, *, limit: int = TOP_CONVERSATIONS) -> list[dict[str, Any]]:
    """[{conversation_id, title, cost, requests, prompt_tokens, cached_tokens}] by cost over the period.

    Reads the conversation rollups: they have no model, user or status dimension, so only the
    team and period filters apply here. A day counts when it starts inside the period.
    """
    days = UsageConversationDaily.objects.filter(
        team=filters.team,
        bucket__gte=bucket_floor(filters.period.start, hourly=False),
        bucket__lt=filters.period.end,
    )
    rows = _top_by_totals(filters, days, limit=limit)
    if rows is None:  # fewer than `limit` conversations lie wholly inside: rank the period's days
        rows = list(_conversation_sums(days).order_by("-cost", "conversation_id")[:limit])
    titles = _conversation_titles(filters.team.pk, [row["conversation_id"] for row in rows])
    return [
        {
            **row,
            "cost": usd(row["cost"]),
            "title": titles.get(row["conversation_id"], ""),
        }
        for row in rows
    ]


def _conversation_sums(rows: QuerySet[Any]) -> QuerySet[Any]:
    sums: QuerySet[Any] = (
        rows.order_by()
        .values("conversation_id")
        .annotate(
            cost=Sum("total_cost_e10"),
            requests=Sum("requests"),
            prompt_tokens=Sum("prompt_tokens"),
            cached_tokens=Sum("cached_tokens"),
        )
    )
    return sums


def _top_by_totals(filters: Filters, days: QuerySet[Any], *, limit: int) -> list[dict[str, Any]] | None:
    """The exact top `limit` without summing every conversation-day of the period, or None.

    A conversation whose days all fall inside the period costs its all-time total there; one
    that straddles the period costs at most its total. So take the top `limit` wholly inside
    (an index walk down the totals), and sum the period's days only for straddlers whose total
    reaches the last of those: no other conversation can rank.
    """
    first_day, end = bucket_floor(filters.period.start, hourly=False), filters.period.end
    totals = UsageConversationTotal.objects.filter(team=filters.team)
    inside = Q(first_bucket__gte=first_day, last_bucket__lt=end)
    ranked: list[dict[str, Any]] = [
        dict(row)
        for row in totals.filter(inside)
        .order_by("-total_cost_e10", "conversation_id")
        .annotate(cost=F("total_cost_e10"))
        .values("conversation_id", "cost", "requests", "prompt_tokens", "cached_tokens")[:limit]
    ]
    if len(ranked) < limit:
        return None
    straddling = list(
        totals.filter(
            total_cost_e10__gte=ranked[-1]["cost"], first_bucket__lt=end, last_bucket__gte=first_day
        )
        .exclude(inside)
        .values_list("conversation_id", flat=True)[: MAX_STRADDLERS + 1]
    )
    if len(straddling) > MAX_STRADDLERS:  # the last total is too low to rule many out
        return None
    ranked += _conversation_sums(days.filter(conversation_id__in=straddling))
    ranked.sort(key=lambda row: (-row["cost"], row["conversation_id"]))
    return ranked[:limit]


def _conversation_titles(team_id: int, ids: list[int]) -> dict[int, str]:
    """Each conversation's title (or "Conversation #12"), "(deleted)" once it is gone: through
    the usage sources that chat registers, since analytics does not import chat."""
    links = source_links(team_id=team_id, keys=[SourceKey(CONVERSATION, pk) for pk in ids])
    return {key.id: link.name for key, link in links.items()}


def prompt_growth(filters: Filters, *, sessions: int = GROWTH_SESSIONS) -> list[dict[str, Any]]:
    """[{conversation_id, title, turns: [prompt tokens per request, in order]}] for the top sessions.

    The only raw-row read of the dashboard: at most `GROWTH_TURNS` rows of each of a handful
    of conversations, through the records' conversation index.
    """
    top = top_conversations(filters, limit=sessions)
    out = []
    for row in top:
        turns = list(
            UsageRecord.objects.filter(
                team=filters.team,
                conversation_id=row["conversation_id"],
                created_at__gte=filters.period.start,
                created_at__lt=filters.period.end,
            )
            .order_by("created_at", "id")
            .values_list("prompt_tokens", flat=True)[:GROWTH_TURNS]
        )
        out.append({"conversation_id": row["conversation_id"], "title": row["title"], "turns": turns})
    return out
