"""Batch items as the cause of usage records (source "batch-item:<id>:<attempt>"): their pages.

Registered with `playground.usage.sources` in `BatchesConfig.ready`, so the request log links
a record to its item without importing batches.
"""

from __future__ import annotations

from collections.abc import Collection

from django.urls import reverse

from playground.batches.models import BatchItem
from playground.usage.sources import Found


class BatchItemSources:
    label = "Batch item {id}"

    def resolve(self, *, team_id: int, ids: Collection[int]) -> dict[int, Found]:
        items = BatchItem.objects.filter(batch__team_id=team_id, pk__in=ids).values_list("pk", flat=True)
        return {pk: Found(reverse("batches:item-detail", args=[pk])) for pk in items}
