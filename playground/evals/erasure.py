"""What evaluations keep of an end user, for `usage.erasure` (issue 37). A dataset item made from
a request in the log (`services.from_records`) is a copy of that request's text: when the request
was the erased end user's, the copy loses its text as the record does (its place in the dataset's
versions stays, so past experiments still line up, and its metadata says why it is empty).
Elsewhere the id is replaced by its tombstone: in items' texts and in the checks' reasons, which
may quote an answer or an expected output."""

from __future__ import annotations

from typing import Any

from playground.evals.models import CheckResult, DatasetItem
from playground.usage.erasure import Columns, Erasure

ITEM_COLUMNS = Columns(text=("input", "expected"), json=("messages", "variables", "metadata"))
ERASED_NOTE = "end user erased"


class EvalsEraser:
    tables = (DatasetItem, CheckResult)

    def erase(self, run: Erasure) -> dict[str, int]:
        items = DatasetItem.objects.filter(dataset__team_id=run.team_id)
        copies = _copies_emptied(items.filter(metadata__request_id__in=run.request_ids), run.dry_run)
        return {
            "dataset_items": copies + run.scrubbed(items, ITEM_COLUMNS),
            "check_reasons": run.scrubbed(
                CheckResult.objects.filter(target__experiment__team_id=run.team_id), Columns(text=("reason",))
            ),
        }


def _copies_emptied(copies: Any, dry_run: bool) -> int:
    """The items copied from the end user's requests, their text dropped (counted only if `dry_run`)."""
    found = list(copies.only("id", "metadata"))
    for item in found:
        item.input, item.messages, item.variables, item.expected = "", None, {}, ""
        item.metadata = {"request_id": item.metadata.get("request_id", ""), "erased": ERASED_NOTE}
    if found and not dry_run:
        DatasetItem.objects.bulk_update(found, ["input", "messages", "variables", "expected", "metadata"])
    return len(found)
