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


def anthropic_style_card() -> PriceCard:
    """Writes dearer than fresh input, reads cheaper (Anthropic's 1.25x and 0.1x of input)."""
    return PriceCard(
        input_per_m=Decimal("3.00"),
        cached_input_per_m=Decimal("0.30"),
        cache_write_input_per_m=Decimal("3.75"),
        output_per_m=Decimal("15.00"),
    )


def test_it_bills_cache_writes_at_the_cache_write_price_and_only_once() -> None:
    usage = NormalizedUsage(
        prompt_tokens=1_000_000, cached_tokens=500_000, cache_write_tokens=200_000, completion_tokens=10_000
    )

    cost = cost_for(usage=usage, card=anthropic_style_card())

    assert cost.input == Decimal("0.9")  # 300k fresh x $3.00/M
    assert cost.cached_input == Decimal("0.15")  # 500k x $0.30/M
    assert cost.cache_write == Decimal("0.75")  # 200k x $3.75/M
    assert cost.output == Decimal("0.15")  # 10k x $15/M
    assert cost.total == Decimal("1.95")


def test_a_card_without_a_cache_write_price_bills_writes_as_fresh_input() -> None:
    written = NormalizedUsage(prompt_tokens=1000, completion_tokens=0, cache_write_tokens=800)
    unknown = NormalizedUsage(prompt_tokens=1000, completion_tokens=0)

    cost = cost_for(usage=written, card=kimi_k25_card())

    assert (cost.input, cost.cache_write) == (Decimal("0.00012"), Decimal("0.00048"))
    assert cost.total == cost_for(usage=unknown, card=kimi_k25_card()).total == Decimal("0.0006")


def test_the_stored_cost_rounds_each_part_and_adds_them_up() -> None:
    card = PriceCard(
        input_per_m=Decimal("0.123457"),
        cached_input_per_m=Decimal("0.011111"),
        cache_write_input_per_m=Decimal("0.154321"),
        output_per_m=Decimal("1.333333"),
    )
    usage = NormalizedUsage(prompt_tokens=7, cached_tokens=3, cache_write_tokens=3, completion_tokens=1)

    stored = cost_for(usage=usage, card=card).stored()

    assert stored.cache_write == Decimal("0.0000004630")  # 3 x 0.154321 / 1e6 = 4.62963e-7
    assert stored.total == stored.input + stored.cached_input + stored.cache_write + stored.output
