"""The one place that turns tokens into money.

cost = (prompt - cached - written) * input + cached * cached_input + written * cache_write
+ completion * output, with prices in USD per million tokens. `prompt_tokens` includes cached
and written tokens, so none is billed twice; unknown cached or written (None) is billed as
fresh input, which is what the provider charges when it reports no cache hit, and what a
provider that does not separate writes (Workers AI) bills them at.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from playground.catalog.models import PriceCard
from playground.providers.usage_normalize import NormalizedUsage

PER_MILLION = Decimal(1_000_000)
ZERO = Decimal(0)
STORED_PLACES = Decimal("1e-10")


@dataclass(frozen=True)
class Cost:
    input: Decimal  # fresh input: neither read from nor written to the cache
    cached_input: Decimal
    output: Decimal
    cache_write: Decimal

    @property
    def total(self) -> Decimal:
        return self.input + self.cached_input + self.cache_write + self.output

    def stored(self) -> Cost:
        """Each component at the usage columns' precision (10 places, half up), as it is stored.

        Rounded here rather than by the database, so the record in memory, the stored row and
        the rollups built from either hold the same figures, and the total is their sum.
        """
        parts = (self.input, self.cached_input, self.output, self.cache_write)
        return Cost(*(part.quantize(STORED_PLACES, rounding=ROUND_HALF_UP) for part in parts))


UNPRICED = Cost(ZERO, ZERO, ZERO, ZERO)


def cost_for(*, usage: NormalizedUsage, card: PriceCard | None) -> Cost:
    if card is None:
        return UNPRICED
    cached = usage.cached_tokens or 0
    written = usage.cache_write_tokens or 0
    return Cost(
        input=Decimal(usage.prompt_tokens - cached - written) * card.input_per_m / PER_MILLION,
        cached_input=Decimal(cached) * card.effective_cached_input_per_m / PER_MILLION,
        output=Decimal(usage.completion_tokens) * card.output_per_m / PER_MILLION,
        cache_write=Decimal(written) * card.effective_cache_write_input_per_m / PER_MILLION,
    )


def cache_miss_cost(*, tokens: int, card: PriceCard | None) -> Decimal:
    """What `tokens` cost as fresh input beyond what they would have cost cached: the money a
    prefix that should have been cached and was not lost."""
    if card is None or tokens <= 0:
        return ZERO
    return Decimal(tokens) * (card.input_per_m - card.effective_cached_input_per_m) / PER_MILLION


@dataclass(frozen=True)
class KnownCard:
    """The price card of a request, already looked up, and what records it prices call it."""

    card: PriceCard | None  # None: the model has none that day
    model_id: str
    day: dt.date
    label: str = ""  # "" when unpriced
