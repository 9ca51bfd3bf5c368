"""The FOCUS export's charges: the dashboard's rollup rows summed per UTC day, model and price card.

The rows are `rollups.rollup_rows(filters)`, the same rows the dashboard's headline sums, so
the export's cost equals the headline's to the last unit of the rollups (1e-10 USD). A period
of up to seven days reads the hourly rollup (its buckets start on the hour, as the period
does); its hours are summed into their UTC day here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import Sum
from django.db.models.functions import TruncDay

from playground.analytics.filters import Filters
from playground.analytics.selectors.rollups import rollup_rows
from playground.catalog.models import PriceCard

# What the rollups cannot select, by filter name: the dashboard's figures leave these out too.
_NOT_IN_ROLLUPS = {
    "conversation_id": "conversation",
    "tag": "tag",
    "session": "session",
    "cached_share": "cached share",
    "api_key_id": "API key",
    "end_user": "end user",
    "route_rule": "routing rule",
    "route_outcome": "routing outcome",
    "score": "score",
}


@dataclass(frozen=True)
class DailyCharge:
    """One team's usage of one model, priced by one card, on one UTC day (or its part in the period)."""

    day: dt.datetime  # the UTC day's start
    model_id: str
    card: PriceCard | None  # None: unpriced
    prompt_tokens: int  # cached and written ones included
    cached_tokens: int
    cache_write_tokens: int
    completion_tokens: int
    input_cost_e10: int  # fresh input
    cached_input_cost_e10: int
    cache_write_cost_e10: int
    output_cost_e10: int


def focus_unserved(filters: Filters) -> str:
    """Why the FOCUS export cannot answer the filters ("" when it can): it is built from the
    rollups, which hold no conversation, tag, session, cached share, API key or end user."""
    chosen = [label for field, label in _NOT_IN_ROLLUPS.items() if getattr(filters, field)]
    if not chosen:
        return ""
    return (
        "The FOCUS export is built from the usage rollups, which do not hold the "
        f"{', '.join(chosen)} filter{'s' if len(chosen) > 1 else ''}: clear "
        f"{'them' if len(chosen) > 1 else 'it'} to export FOCUS."
    )


def focus_daily_charges(filters: Filters) -> list[DailyCharge]:
    """The period's charges of the filters' team, by UTC day, model and price card, oldest first.

    Raises ValueError for filters the rollups do not hold (`focus_unserved`).
    """
    if focus_unserved(filters):
        raise ValueError(focus_unserved(filters))
    grouped = list(
        rollup_rows(filters)
        .annotate(day=TruncDay("bucket", tzinfo=dt.UTC))
        .values("day", "model_id", "price_card_id")
        .annotate(
            prompt=Sum("prompt_tokens"),
            cached=Sum("cached_tokens"),
            written=Sum("cache_write_tokens"),
            completion=Sum("completion_tokens"),
            input_e10=Sum("input_cost_e10"),
            cached_e10=Sum("cached_input_cost_e10"),
            written_e10=Sum("cache_write_cost_e10"),
            output_e10=Sum("output_cost_e10"),
        )
        .order_by("day", "model_id", "price_card_id")
    )
    cards = PriceCard.objects.select_related("model").in_bulk(
        {row["price_card_id"] for row in grouped if row["price_card_id"]}
    )
    return [
        DailyCharge(
            day=row["day"],
            model_id=row["model_id"],
            card=cards.get(row["price_card_id"]),
            prompt_tokens=row["prompt"] or 0,
            cached_tokens=row["cached"] or 0,
            cache_write_tokens=row["written"] or 0,
            completion_tokens=row["completion"] or 0,
            input_cost_e10=row["input_e10"] or 0,
            cached_input_cost_e10=row["cached_e10"] or 0,
            cache_write_cost_e10=row["written_e10"] or 0,
            output_cost_e10=row["output_e10"] or 0,
        )
        for row in grouped
    ]


def list_card_for(card: PriceCard, *, day: dt.date) -> PriceCard:
    """The public card behind a team's override on `day` (its list price); the card itself when it
    is a global card or no global card covers that day."""
    if not card.is_override:
        return card
    listed = (
        PriceCard.objects.filter(model=card.model_id, team__isnull=True, effective_from__lte=day)
        .order_by("-effective_from")
        .first()
    )
    return listed or card
