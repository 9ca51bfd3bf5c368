from __future__ import annotations

from decimal import Decimal

import pytest

from playground.catalog.models import PriceCard
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.pricing import cost_for


def kimi_k25_card() -> PriceCard:
    return PriceCard(
        input_per_m=Decimal("0.60"), cached_input_per_m=Decimal("0.10"), output_per_m=Decimal("3.00")
    )


def test_it_bills_cached_tokens_at_the_cached_rate_and_only_once() -> None:
    usage = NormalizedUsage(prompt_tokens=1_000_000, cached_tokens=600_000, completion_tokens=100_000)

    cost = cost_for(usage=usage, card=kimi_k25_card())

    assert cost.input == Decimal("0.24")  # 400k fresh x $0.60/M
    assert cost.cached_input == Decimal("0.06")  # 600k cached x $0.10/M
    assert cost.output == Decimal("0.3")  # 100k x $3.00/M
    assert cost.total == Decimal("0.60")


def test_a_cached_token_costs_a_sixth_of_a_fresh_one() -> None:
    card = kimi_k25_card()
    fresh = cost_for(
        usage=NormalizedUsage(prompt_tokens=6000, completion_tokens=0, cached_tokens=0), card=card
    )
    cached = cost_for(
        usage=NormalizedUsage(prompt_tokens=6000, completion_tokens=0, cached_tokens=6000), card=card
    )

    assert fresh.total == 6 * cached.total


def test_unknown_cached_tokens_are_billed_as_fresh_input() -> None:
    cost = cost_for(usage=NormalizedUsage(prompt_tokens=1000, completion_tokens=0), card=kimi_k25_card())

    assert cost.input == Decimal("0.0006")
    assert cost.cached_input == 0


def test_a_model_without_a_cache_discount_bills_cached_tokens_as_input() -> None:
    card = PriceCard(input_per_m=Decimal("0.35"), cached_input_per_m=None, output_per_m=Decimal("0.75"))

    cost = cost_for(
        usage=NormalizedUsage(prompt_tokens=1000, completion_tokens=0, cached_tokens=1000), card=card
    )

    assert cost.total == Decimal("0.00035")


@pytest.mark.parametrize("usage", [NormalizedUsage(prompt_tokens=10, completion_tokens=10, cached_tokens=5)])
def test_a_request_without_a_price_card_costs_nothing_rather_than_a_guess(usage: NormalizedUsage) -> None:
    assert cost_for(usage=usage, card=None).total == 0
