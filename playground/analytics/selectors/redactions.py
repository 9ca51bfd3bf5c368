"""Redacted values per type over the period (issue 37): what the redactor replaced in the records
of the filtered period, summed from each record's counts (`UsageRecord.redactions`).

Read from the records, narrowed by every filter the request log takes (`request_log.log_records`),
like the schema conformance table: only records that were redacted hold counts (`redactions`
set), and a partial index on `(team, created_at)` of those keeps the read to them. One grouped
query sums every type's count per bucket in the database (`KT`: `JSON_EXTRACT` on SQLite,
`->>` on PostgreSQL).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import BigIntegerField, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, TruncDay, TruncHour

from playground.analytics.filters import Filters
from playground.analytics.selectors.request_log import log_records
from playground.lib.redaction import ENTITIES
from playground.usage.storage import REDACTOR_ERROR

# Each type the redactor counts, then the records whose redactor failed (kept as metadata).
KINDS = (*ENTITIES, REDACTOR_ERROR)


def redactions_over_time(filters: Filters) -> list[dict[str, Any]]:
    """[{bucket, kind, values}] for each bucket and type with at least one value replaced."""
    trunc = TruncHour if filters.period.hourly else TruncDay
    sums = {f"n_{kind}": Sum(Cast(KT(f"redactions__{kind}"), BigIntegerField())) for kind in KINDS}
    grouped = (
        log_records(filters)
        .filter(redactions__isnull=False)
        .order_by()
        .annotate(bucket=trunc("created_at", tzinfo=dt.UTC))
        .values("bucket")
        .annotate(**sums)
        .order_by("bucket")
        .values_list("bucket", *sums)
    )
    return [
        {"bucket": bucket, "kind": kind, "values": values}
        for bucket, *counts in grouped
        for kind, values in zip(KINDS, counts, strict=True)
        if values
    ]
