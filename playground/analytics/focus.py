"""FOCUS 1.3 export of the filtered period: one row per UTC day, model, price card and token kind.

FOCUS (the FinOps Foundation's cost and usage format) wants a charge per SKU price; a token
of each kind is its own SKU price here, as in the FinOps Foundation's work on AI costs: fresh
input, cached input, cache write and output tokens each get a row, with the kind's unit price
from the card. Cache writes are counted where the provider reports them (`usage_normalize`);
a provider that does not separate them (Workers AI) has them in the fresh input row.

Costs come from the rollups (`selectors.focus`): `BilledCost` and `EffectiveCost` are the sums
of the records' stored costs, so the file's `BilledCost` adds up to the dashboard's cost for
the period exactly. `ListCost` and `ContractedCost` are unit price times quantity, as FOCUS
requires; they equal `BilledCost` whenever no record's cost needed rounding to 1e-10 USD
(every card with at most four decimals per million tokens). Column by column in
docs/usage-analytics.md ("FOCUS export").
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings

from playground.analytics.filters import Filters
from playground.analytics.selectors.focus import DailyCharge, focus_daily_charges, list_card_for
from playground.analytics.selectors.rollups import DAY, bucket_floor, usd
from playground.catalog.models import PriceCard

FOCUS_VERSION = "1.3"
PER_MILLION = Decimal(1_000_000)
TOKENS = "Tokens"
# FOCUS's own columns (Mandatory, and the Conditional and Recommended ones that apply), then ours.
COLUMNS: tuple[str, ...] = (
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency",
    "ChargePeriodEnd", "ChargePeriodStart", "ConsumedQuantity", "ConsumedUnit", "ContractedCost",
    "ContractedUnitPrice", "EffectiveCost", "HostProviderName", "InvoiceIssuerName", "ListCost",
    "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit", "ProviderName",
    "PublisherName", "ServiceCategory", "ServiceName", "ServiceProviderName", "ServiceSubcategory",
    "SkuId", "SkuMeter", "SkuPriceDetails", "SkuPriceId", "SubAccountId", "SubAccountName", "Tags",
    "x_TokenKind", "x_PriceCardLabel",
)  # fmt: skip


@dataclass(frozen=True)
class TokenKind:
    key: str  # x_TokenKind, and the end of SkuId and SkuPriceId
    meter: str  # SkuMeter
    quantity: Callable[[DailyCharge], int]
    cost_e10: Callable[[DailyCharge], int]
    per_million: Callable[[PriceCard], Decimal]


TOKEN_KINDS = (
    TokenKind(
        "input",
        "Input tokens",
        lambda charge: charge.prompt_tokens - charge.cached_tokens - charge.cache_write_tokens,
        lambda charge: charge.input_cost_e10,
        lambda card: card.input_per_m,
    ),
    TokenKind(
        "cached_input",
        "Cached input tokens",
        lambda charge: charge.cached_tokens,
        lambda charge: charge.cached_input_cost_e10,
        lambda card: card.effective_cached_input_per_m,
    ),
    TokenKind(
        "cache_write",
        "Cache write tokens",
        lambda charge: charge.cache_write_tokens,
        lambda charge: charge.cache_write_cost_e10,
        lambda card: card.effective_cache_write_input_per_m,
    ),
    TokenKind(
        "output",
        "Output tokens",
        lambda charge: charge.completion_tokens,
        lambda charge: charge.output_cost_e10,
        lambda card: card.output_per_m,
    ),
)


def _timestamp(at: dt.datetime) -> str:
    """FOCUS's date-time format: UTC, whole seconds, "Z"."""
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _exclusive_end(at: dt.datetime) -> dt.datetime:
    """An exclusive end in whole seconds that still includes `at`'s own second's records."""
    whole = at.replace(microsecond=0)
    return whole if whole == at else whole + dt.timedelta(seconds=1)


def _month(day: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    start = day.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return start, (start + dt.timedelta(days=32)).replace(day=1)


def _decimal(value: Decimal) -> str:
    """Never in exponent form, and always with a decimal point: a reader that infers a CSV's
    types (the FinOps Foundation's validator does) would take "40" for an integer, not a Decimal."""
    text = format(value, "f")
    return text if "." in text else f"{text}.0"


def _per_token(per_million: Decimal) -> Decimal:
    return per_million / PER_MILLION


def _price_details(kind: TokenKind, card: PriceCard) -> dict[str, str]:
    """What makes this SKU price: FOCUS defines no property for tokens, so each key is ours (x_)."""
    return {
        "x_PriceCard": card.label,
        "x_TokenKind": kind.key,
        "x_UnitPricePerMillionTokens": _decimal(kind.per_million(card).normalize()),
    }


def focus_rows(filters: Filters) -> Iterator[dict[str, Any]]:
    """The export's rows, oldest day first; None where FOCUS wants a null."""
    team = filters.team
    account = f"team-{team.pk}"  # not a bare number, which a reader inferring types takes for one
    provider = settings.FOCUS_PROVIDER_NAME
    period = filters.period
    first = bucket_floor(period.start, hourly=period.hourly)
    for charge in focus_daily_charges(filters):
        card = charge.card
        listed = list_card_for(card, day=charge.day.date()) if card is not None else None
        billing_start, billing_end = _month(charge.day)
        for kind in TOKEN_KINDS:
            quantity, cost = kind.quantity(charge), usd(kind.cost_e10(charge))
            if not quantity and not cost:
                continue
            contracted = _per_token(kind.per_million(card)) if card else Decimal(0)
            listed_price = _per_token(kind.per_million(listed)) if listed else Decimal(0)
            priced_by = f"priced by {card.label}" if card else "unpriced (no price card that day)"
            yield {
                "BilledCost": cost,
                "BillingAccountId": account,
                "BillingAccountName": team.name,
                "BillingCurrency": "USD",
                "BillingPeriodEnd": _timestamp(billing_end),
                "BillingPeriodStart": _timestamp(billing_start),
                "ChargeCategory": "Usage",
                "ChargeClass": None,
                "ChargeDescription": f"{kind.meter} of {charge.model_id}, {priced_by}",
                "ChargeFrequency": "Usage-Based",
                "ChargePeriodEnd": _timestamp(_exclusive_end(min(charge.day + DAY, period.end))),
                "ChargePeriodStart": _timestamp(max(charge.day, first)),
                "ConsumedQuantity": Decimal(quantity),
                "ConsumedUnit": TOKENS,
                "ContractedCost": contracted * quantity,
                "ContractedUnitPrice": contracted,
                "EffectiveCost": cost,
                "HostProviderName": provider,
                "InvoiceIssuerName": provider,
                "ListCost": listed_price * quantity,
                "ListUnitPrice": listed_price,
                "PricingCategory": "Standard",
                "PricingQuantity": Decimal(quantity),
                "PricingUnit": TOKENS,
                "ProviderName": provider,
                "PublisherName": provider,
                "ServiceCategory": "AI and Machine Learning",
                "ServiceName": provider,
                "ServiceProviderName": provider,
                "ServiceSubcategory": "Generative AI",
                "SkuId": f"{charge.model_id}:{kind.key}",
                "SkuMeter": kind.meter,
                "SkuPriceDetails": _price_details(kind, card) if card else None,
                "SkuPriceId": f"price-card-{card.pk}:{kind.key}" if card else None,
                "SubAccountId": account,
                "SubAccountName": team.name,
                "Tags": {"playground/team": team.slug, "playground/token-kind": kind.key},
                "x_TokenKind": kind.key,
                "x_PriceCardLabel": card.label if card else None,
            }


def _cell(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, Decimal):
        return _decimal(value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return value


def focus_csv(filters: Filters) -> str:
    """The FOCUS file: RFC 4180 CSV, a header row of FOCUS column ids, nulls as empty fields."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    for row in focus_rows(filters):
        writer.writerow([_cell(row[column]) for column in COLUMNS])
    return out.getvalue()
