"""What a request would cost before it is sent: estimated tokens through the one cost function.

The batch page's estimate and the chat's pre-flight cost both come from here, priced by the
card that will price their records (`KnownCard`: the team's override when one applies) and by
`pricing.cost_for`, so an estimate and the record it foretells never disagree on prices.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.pricing import ZERO, KnownCard, cost_for


@dataclass(frozen=True)
class CostEstimate:
    card: KnownCard
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int  # of `prompt_tokens`
    cache_write_tokens: int = 0  # of `prompt_tokens`, apart from the cached ones

    @property
    def cost(self) -> Decimal | None:
        """The total in USD; None when no card prices the model."""
        if self.card.card is None:
            return None
        usage = NormalizedUsage(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.output_tokens,
            cached_tokens=self.cached_tokens,
            cache_write_tokens=self.cache_write_tokens,
        )
        return cost_for(usage=usage, card=self.card.card).total


def cost_estimate(
    *, card: KnownCard, prompt_tokens: int, output_tokens: int, cache_share: Decimal = ZERO
) -> CostEstimate:
    """`prompt_tokens` and `output_tokens` priced by `card`, `cache_share` of the prompt cached
    (rounded down to whole tokens)."""
    cached = int(prompt_tokens * cache_share)
    return CostEstimate(
        card=card, prompt_tokens=prompt_tokens, output_tokens=output_tokens, cached_tokens=cached
    )


def worst_case_estimate(*, card: KnownCard, prompt_tokens: int, output_tokens: int) -> CostEstimate:
    """The most `prompt_tokens` and `output_tokens` may cost by `card`: no token cached, and
    every prompt token written to the cache when the card prices writes above fresh input (as
    the budget's reservation assumes, `budgets.worst_case`)."""
    priced = card.card
    dearer_writes = priced is not None and priced.effective_cache_write_input_per_m > priced.input_per_m
    return CostEstimate(
        card=card,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        cached_tokens=0,
        cache_write_tokens=prompt_tokens if dearer_writes else 0,
    )
