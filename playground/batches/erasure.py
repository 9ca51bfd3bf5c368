"""What batches keep of an end user, for `usage.erasure` (issue 37): the id written in the team's
batches (names, previews) and items (request, answer, error, external reference), replaced by its
tombstone. A batch line takes no `user` field and no attribution header, so an item names no end
user of its own; its record's tags (which carry the external reference) are the records' part."""

from __future__ import annotations

from playground.batches.models import Batch, BatchItem
from playground.usage.erasure import Columns, Erasure


class BatchEraser:
    tables = (BatchItem, Batch)

    def erase(self, run: Erasure) -> dict[str, int]:
        return {
            "batch_items": run.scrubbed(
                BatchItem.objects.filter(batch__team_id=run.team_id),
                Columns(text=("external_reference", "error"), json=("request", "response")),
            ),
            "batches": run.scrubbed(
                Batch.objects.filter(team_id=run.team_id), Columns(text=("name",), json=("preview",))
            ),
        }
