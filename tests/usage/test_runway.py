"""A session's runway: the prompt's growth per turn, the turns left before the context window,
and the next ten turns priced by the one cost function."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from playground.catalog.models import PriceCard
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.insights.runway import (
    Turn,
    prompt_growth_per_turn,
    session_runway,
    tokens_short,
    turns_left,
)
from playground.usage.pricing import cost_for

CARD = PriceCard(
    input_per_m=Decimal("1.00"), cached_input_per_m=Decimal("0.10"), output_per_m=Decimal("2.00")
)


def test_growth_is_the_median_of_the_last_increases_and_ignores_shrinking_or_repeated_prompts() -> None:
    # +1000, +1000, 0 (a regenerated answer), -2500 (an edit), +1200, +50000 (one long paste), +1100
    prompts = [1000, 2000, 3000, 3000, 500, 1700, 51700, 52800]
    assert prompt_growth_per_turn(prompts) == 1100  # median of 1000, 1000, 1200, 50000, 1100
    assert prompt_growth_per_turn([4000, 4000, 3000]) == 0


def test_turns_left_keep_room_for_the_answer() -> None:
    assert turns_left(last_prompt=10_000, growth=1000, answer=500, context_window=16_000) == 5
    assert turns_left(last_prompt=15_900, growth=1000, answer=500, context_window=16_000) == 0
    assert turns_left(last_prompt=10_000, growth=0, answer=500, context_window=16_000) is None


def test_the_runway_prices_the_next_ten_turns_at_the_sessions_cached_share_and_card() -> None:
    turns = [
        Turn(prompt_tokens=1000, cached_tokens=0, completion_tokens=200),
        Turn(prompt_tokens=2000, cached_tokens=1000, completion_tokens=300),
        Turn(prompt_tokens=3000, cached_tokens=None, completion_tokens=100),  # unknown: not in the share
        Turn(prompt_tokens=4000, cached_tokens=3000, completion_tokens=200),
    ]
    runway = session_runway(turns, context_window=128_000, card=CARD)

    assert runway is not None
    assert (runway.growth, runway.answer_tokens, runway.last_prompt_tokens) == (1000, 200, 4000)
    assert runway.turns_left == (128_000 - 200 - 4000) // 1000 == 123
    assert runway.cached_share == Decimal(4000) / Decimal(7000)
    assert runway.cached_percent == 57
    assert runway.next_turns == 10
    expected = sum(
        (
            cost_for(
                usage=NormalizedUsage(
                    prompt_tokens=4000 + k * 1000,
                    completion_tokens=200,
                    cached_tokens=int((4000 + k * 1000) * Decimal(4000) / Decimal(7000)),
                ),
                card=CARD,
            ).total
            for k in range(1, 11)
        ),
        Decimal(0),
    )
    assert runway.next_turns_cost == expected
    # by hand: prompts 5000..14000 (95,000 tokens: 40,715 fresh at $1, 54,285 cached at $0.10) and
    # 2,000 out at $2 per million
    assert Decimal("0.0501") < runway.next_turns_cost < Decimal("0.0502")
    assert not runway.few_left
    assert runway.window_label == "128k"


def test_a_session_that_writes_to_the_cache_has_its_next_turns_priced_with_its_write_share() -> None:
    """Anthropic-style prompt caching writes each turn's new part: at a dearer write price the
    runway must say so, and where writes are unknown (Workers AI) they stay fresh input."""
    card = PriceCard(
        input_per_m=Decimal("1.00"),
        cached_input_per_m=Decimal("0.10"),
        cache_write_input_per_m=Decimal("1.25"),
        output_per_m=Decimal("2.00"),
    )
    writing = [
        Turn(prompt_tokens=1000, cached_tokens=0, completion_tokens=100, cache_write_tokens=1000),
        Turn(prompt_tokens=2000, cached_tokens=1000, completion_tokens=100, cache_write_tokens=1000),
        Turn(prompt_tokens=3000, cached_tokens=2000, completion_tokens=100, cache_write_tokens=1000),
    ]
    silent = [replace(turn, cache_write_tokens=None) for turn in writing]

    runway = session_runway(writing, context_window=128_000, card=card)
    unknown = session_runway(silent, context_window=128_000, card=card)

    assert runway is not None and unknown is not None
    # by hand: prompts 4,000..13,000 (85,000 tokens), half cached and half written (3,000 of
    # 6,000 each): 42,500 x $0.10 + 42,500 x $1.25, and 1,000 out x $2, per million
    assert runway.next_turns_cost == Decimal("0.00425") + Decimal("0.053125") + Decimal("0.002")
    # writes unknown: the uncached half is fresh input at $1
    assert unknown.next_turns_cost == Decimal("0.00425") + Decimal("0.0425") + Decimal("0.002")


def test_few_turns_left_are_flagged_and_only_those_are_priced() -> None:
    turns = [Turn(5000, 4000, 100), Turn(6000, 5000, 100), Turn(7000, 6000, 100)]
    runway = session_runway(turns, context_window=12_000, card=CARD)

    assert runway is not None
    assert runway.turns_left == 4  # 8000, 9000, 10000, 11000 (+100 out) fit; 12000 does not
    assert runway.few_left
    assert runway.next_turns == 4


def test_no_runway_before_two_turns_or_without_a_known_window() -> None:
    one = [Turn(1000, 0, 100)]
    two = [Turn(1000, 0, 100), Turn(2000, 1000, 100)]
    assert session_runway(one, context_window=8192, card=CARD) is None
    assert session_runway(two, context_window=None, card=CARD) is None
    unpriced = session_runway(two, context_window=8192, card=None)
    assert unpriced is not None and unpriced.next_turns_cost is None


def test_windows_are_named_as_models_are() -> None:
    assert [tokens_short(n) for n in (131_072, 128_000, 8_192, 262_144, 500)] == [
        "128k",
        "128k",
        "8k",
        "256k",
        "500",
    ]
