"""Conversations as the cause of usage records: their titles and pages, for the usage pages.

Registered with `playground.usage.sources` in `ChatConfig.ready`, so the log and the charts
name a record's conversation without importing chat.
"""

from __future__ import annotations

from collections.abc import Collection

from django.urls import reverse

from playground.chat.models import Conversation
from playground.usage.sources import Found


class ConversationSources:
    label = "Conversation #{id}"

    def resolve(self, *, team_id: int, ids: Collection[int]) -> dict[int, Found]:
        rows = Conversation.objects.filter(team_id=team_id, pk__in=ids).values_list("pk", "title")
        return {pk: Found(reverse("chat:conversation-detail", args=[pk]), title) for pk, title in rows}
