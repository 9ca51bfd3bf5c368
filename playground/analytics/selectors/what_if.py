"""What-if re-pricing: the period's tokens priced again under another card, or without the cache discount."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Sum

from playground.analytics.filters import Filters
from playground.analytics.selectors.rollups import rollup_rows, usd
from playground.catalog.models import PriceCard
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.pricing import cost_for

NO_CACHE_DISCOUNT = "nocache"


@dataclass(frozen=True)
class WhatIfTarget:
    key: str
    label: str
    card: PriceCard | None  # None: each group's own card without its cache discount


def what_if_targets() -> list[WhatIfTarget]:
    cards = PriceCard.objects.select_related("model").order_by("model__display_name", "-effective_from")
    return [
        WhatIfTarget(NO_CACHE_DISCOUNT, "The same cards without their cache discount", None),
        *(
            WhatIfTarget(str(card.pk), f"{card.model.display_name} from {card.effective_from}", card)
            for card in cards
        ),
    ]


def what_if_target(key: str) -> WhatIfTarget | None:
    return next((target for target in what_if_targets() if target.key == key), None)


def what_if(filters: Filters, *, target: WhatIfTarget) -> list[dict[str, Any]]:
    """[{model_id, prompt_tokens, cached_tokens, completion_tokens, actual, repriced, difference}].

    The period's tokens per model (and card) priced again by `cost_for` under the target card:
    the one cost function, applied to sums (pricing is linear in tokens, so this equals
    re-pricing each record, to the records' 1e-10 rounding).
    """
    rows = list(
        rollup_rows(filters)
        .values("model_id", "price_card_id")
        .annotate(
            prompt=Sum("prompt_tokens"),
            cached=Sum("cached_tokens"),
            written=Sum("cache_write_tokens"),
            completion=Sum("completion_tokens"),
            cost=Sum("total_cost_e10"),
        )
        .order_by("model_id")
    )
    own_cards = PriceCard.objects.in_bulk({row["price_card_id"] for row in rows if row["price_card_id"]})
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        card = (
            target.card
            if target.card is not None
            else _without_cache_discount(own_cards.get(row["price_card_id"]))
        )
        usage = NormalizedUsage(
            prompt_tokens=row["prompt"],
            completion_tokens=row["completion"],
            cached_tokens=row["cached"],
            cache_write_tokens=row["written"],
        )
        repriced = cost_for(usage=usage, card=card).total if card is not None else Decimal(0)
        entry = out.setdefault(
            row["model_id"],
            {
                "model_id": row["model_id"],
                "prompt_tokens": 0,
                "cached_tokens": 0,
                "completion_tokens": 0,
                "actual": Decimal(0),
                "repriced": Decimal(0),
            },
        )
        entry["prompt_tokens"] += row["prompt"]
        entry["cached_tokens"] += row["cached"]
        entry["completion_tokens"] += row["completion"]
        entry["actual"] += usd(row["cost"])
        entry["repriced"] += repriced
    for entry in out.values():
        entry["difference"] = entry["repriced"] - entry["actual"]
    return list(out.values())


def _without_cache_discount(card: PriceCard | None) -> PriceCard | None:
    if card is None:
        return None
    return PriceCard(
        model=card.model,
        effective_from=card.effective_from,
        input_per_m=card.input_per_m,
        cached_input_per_m=None,  # and no cache-write price: writes are fresh input without a cache
        output_per_m=card.output_per_m,
        label=f"{card.label} without cache discount",
    )
