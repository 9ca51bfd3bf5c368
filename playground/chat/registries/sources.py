"""Conversations and comparison columns as the cause of usage records: their titles and pages.

Registered with `playground.usage.sources` in `ChatConfig.ready`, so the log and the charts
name a record's conversation without importing chat.
"""

from __future__ import annotations

from collections.abc import Collection

from django.urls import reverse

from playground.chat.models import ComparisonColumn, Conversation
from playground.usage.sources import Found


class ConversationSources:
    label = "Conversation #{id}"

    def resolve(self, *, team_id: int, ids: Collection[int]) -> dict[int, Found]:
        rows = Conversation.objects.filter(team_id=team_id, pk__in=ids).values_list("pk", "title")
        return {pk: Found(reverse("chat:conversation-detail", args=[pk]), title) for pk, title in rows}


class ComparisonColumnSources:
    """A compare column's records (source "compare-column:<id>:<attempt>") link to its comparison."""

    label = "Compare column #{id}"

    def resolve(self, *, team_id: int, ids: Collection[int]) -> dict[int, Found]:
        rows = ComparisonColumn.objects.filter(comparison__team_id=team_id, pk__in=ids).values_list(
            "pk", "comparison_id", "model_id"
        )
        return {
            pk: Found(reverse("chat:comparison-detail", args=[comparison_id]), f"Compare: {model_id}")
            for pk, comparison_id, model_id in rows
        }
