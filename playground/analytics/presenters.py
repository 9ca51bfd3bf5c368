"""Display helpers for the dashboard, log and detail pages (no queries, no money arithmetic of
their own)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal

from playground.analytics.charts import milliseconds
from playground.analytics.filters import Filters
from playground.analytics.selectors.conformance import Conformance, ConformanceRow
from playground.analytics.selectors.totals import Headline, Totals
from playground.lib.redaction import CARD, EMAIL, IBAN, IP, PHONE, SECRET
from playground.usage.models import RequestPath, UsageRecord
from playground.usage.money import money
from playground.usage.storage import REDACTOR_ERROR


@dataclass(frozen=True)
class AttributionView:
    """What a gateway request said about itself, as the record's page shows it."""

    tags: list[str]
    metadata: str  # pretty JSON, "" when none was sent


def tags_of(stored: str) -> list[str]:
    """A record's tags from their stored form, ",a,b," (`usage.records.Attribution`)."""
    return [tag for tag in stored.split(",") if tag]


def record_attribution(record: UsageRecord) -> AttributionView | None:
    """The record's attribution; None for a request that came with none (the app's own paths)."""
    sent = (record.api_key_id, record.end_user, record.session, record.tags, record.metadata, record.trace_id)
    if record.path != RequestPath.GATEWAY and not any(sent):
        return None
    metadata = json.dumps(record.metadata, indent=2, ensure_ascii=False) if record.metadata else ""
    return AttributionView(tags=tags_of(record.tags), metadata=metadata)


# What a record's redaction counts are called on its page, in this order.
REDACTION_LABELS = {
    EMAIL: ("e-mail address", "e-mail addresses"),
    PHONE: ("phone number", "phone numbers"),
    CARD: ("card number", "card numbers"),
    IBAN: ("IBAN", "IBANs"),
    IP: ("IP address", "IP addresses"),
    SECRET: ("secret", "secrets"),
    REDACTOR_ERROR: ("redactor failure: no text kept", "redactor failures"),
}


def record_redactions(record: UsageRecord) -> list[str]:
    """What the redactor replaced in the record, kind by kind ("2 e-mail addresses")."""
    counts = record.redactions or {}
    return [
        f"{counts[kind]} {one if counts[kind] == 1 else many}"
        for kind, (one, many) in REDACTION_LABELS.items()
        if counts.get(kind)
    ]


@dataclass(frozen=True)
class FormulaLine:
    name: str
    tokens: str  # e.g. "(2,000 - 1,500)"
    tokens_count: int
    price_per_m: Decimal
    cost: Decimal


def cost_formula(record: UsageRecord) -> list[FormulaLine]:
    """The record's cost components with the card's prices filled in, as stored (nothing recomputed).

    The cache-write line only for a record whose provider reported writes (or one they cost)."""
    card = record.price_card
    if card is None:
        return []
    cached = record.cached_tokens or 0
    written = record.cache_write_tokens or 0
    fresh_of = f"({record.prompt_tokens:,} prompt - {cached:,} cached"
    fresh_of += f" - {written:,} written)" if written else ")"
    lines = [
        FormulaLine(
            "Fresh input",
            fresh_of,
            record.prompt_tokens - cached - written,
            card.input_per_m,
            record.input_cost,
        ),
        FormulaLine(
            "Cached input",
            f"{cached:,} cached",
            cached,
            card.effective_cached_input_per_m,
            record.cached_input_cost,
        ),
    ]
    if written or record.cache_write_cost:
        lines.append(
            FormulaLine(
                "Cache write",
                f"{written:,} written",
                written,
                card.effective_cache_write_input_per_m,
                record.cache_write_cost,
            )
        )
    lines.append(
        FormulaLine(
            "Output",
            f"{record.completion_tokens:,} completion",
            record.completion_tokens,
            card.output_per_m,
            record.output_cost,
        )
    )
    return lines


@dataclass(frozen=True)
class Tile:
    key: str
    label: str
    value: str
    note: str = ""
    title: str = ""  # how the figure is made, on hover


NONE_YET = "\u2013"  # an en dash: no figure (no request reported one)


def _share(value: float | None) -> str:
    return NONE_YET if value is None else f"{value:.1%}"


def _totals_tiles(totals: Totals, *, unpriced: int | None) -> list[Tile]:
    """Spend, requests and tokens; `unpriced`: the requests no card priced (None: not known)."""
    tokens = totals.prompt_tokens + totals.completion_tokens
    return [
        Tile(
            "spend",
            "Spend",
            money(totals.cost),
            f"{unpriced:,} unpriced request{'s' * (unpriced != 1)} not in it" if unpriced else "",
            "What the period's requests cost under their price cards.",
        ),
        Tile("requests", "Requests", f"{totals.requests:,}"),
        Tile(
            "tokens",
            "Tokens",
            f"{tokens:,}",
            f"{totals.prompt_tokens:,} in · {totals.completion_tokens:,} out",
            "Input tokens (cached ones included) plus output tokens.",
        ),
    ]


def attribution_tiles(totals: Totals) -> list[Tile]:
    """The headline of a dashboard filtered by API key or end user: what the rollups by key hold."""
    return [
        *_totals_tiles(totals, unpriced=None),
        Tile(
            "cached-tokens",
            "Cached tokens",
            f"{totals.cached_tokens:,}",
            f"of {totals.prompt_tokens:,} input tokens",
            "Input tokens the provider served from its cache.",
        ),
    ]


def headline_tiles(headline: Headline) -> list[Tile]:
    """The dashboard's headline figures as they read: money by the one rule
    (`usage.money`), counts with thousands grouped, shares and rates in per cent."""
    totals = headline.totals
    return [
        *_totals_tiles(totals, unpriced=headline.unpriced),
        Tile(
            "cached",
            "Cached share",
            _share(headline.cached_share),
            f"{totals.cached_tokens:,} cached input tokens",
            "Cached ÷ input tokens of the requests whose provider reported a cache figure.",
        ),
        Tile(
            "savings",
            "Savings",
            money(headline.savings),
            "from caching",
            "What the cached tokens would have cost at each card's input price, minus what they cost.",
        ),
        Tile(
            "errors",
            "Error rate",
            _share(headline.error_rate),
            f"{headline.errors:,} of {totals.requests:,} requests",
            "Upstream errors, timeouts and refusals (429, budget) ÷ requests; a stop by the user is not one.",
        ),
        Tile(
            "ttft",
            "TTFT p50",
            NONE_YET if headline.ttft_p50 is None else milliseconds(headline.ttft_p50),
            "time to first token",
            "The median time to first token, from the rollups' histograms (exact to a bucket's width).",
        ),
    ]


# --- what a rollup cannot answer ------------------------------------------------------------------

NOT_BY_ATTRIBUTION = "Not kept per API key or end user: clear those filters to see this chart."
HEADLINE_BY_ATTRIBUTION = (
    "Filtered by API key or end user: the rollups kept per key hold spend, requests and tokens; "
    "cached share, savings, error rate and time to first token need those filters cleared."
)


def attribution_unserved(filters: Filters) -> str:
    """Why the rollups by key and end user cannot answer these filters ("" when they can)."""
    chosen = filters.beyond_attribution()
    if not chosen:
        return ""
    return (
        "The rollups by API key and end user keep the period, key, end user and path only: "
        f"clear the {' and '.join(chosen)} filter{'s' * (len(chosen) > 1)} to see this."
    )


@dataclass(frozen=True)
class ConformanceLine:
    """A row of the dashboard's schema conformance table."""

    row: ConformanceRow
    share_valid: str  # "66.7%"


def conformance_lines(conformance: Conformance) -> list[ConformanceLine]:
    return [ConformanceLine(row=row, share_valid=f"{row.share_valid:.1%}") for row in conformance.rows]
