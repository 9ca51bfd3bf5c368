"""A session's runway: how many more turns fit in the model's context window, and what the next
ten cost.

Pure arithmetic over a session's answered turns in order (`runway_selectors` reads them). The
prompt of a conversation grows by about the same amount each turn (the last answer and the new
question), so the next turns are foretold from that growth:

- growth per turn: the median of the last few turn-to-turn increases. A regenerated answer or
  an edited question sends the same or a shorter prompt: such steps say nothing of the growth
  and are left out, and the median shrugs off one long paste.
- turns left: how many more prompts, each `growth` longer than the one before, still leave room
  in the window for a typical answer (the median of the recent answers' lengths).
- the next ten turns' cost: those prompts with the session's own cached and cache-written
  shares and a typical answer, each priced by `pricing.cost_for` with the session's latest
  price card.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from itertools import pairwise
from statistics import median

from playground.catalog.models import PriceCard
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.pricing import ZERO, cost_for

RECENT_STEPS = 5  # the turn-to-turn increases the growth is the median of
NEXT_TURNS = 10
# Fewer turns left than this and the chat warns.
FEW_TURNS = 10


@dataclass(frozen=True)
class Turn:
    """One answered request of a session."""

    prompt_tokens: int  # cached and written tokens included
    cached_tokens: int | None  # None: the provider did not say
    completion_tokens: int
    cache_write_tokens: int | None = None  # None: the provider did not say


@dataclass(frozen=True)
class Runway:
    turns: int  # the answered turns it was foretold from
    last_prompt_tokens: int
    growth: int  # prompt tokens per turn; 0 when the prompt has not grown
    answer_tokens: int  # a typical answer's length, kept free in the window
    context_window: int
    cached_share: Decimal  # of the prompt tokens whose cached count is known
    turns_left: int | None  # None when the prompt does not grow (no end in sight)
    next_turns: int  # the turns priced: ten, or fewer when fewer are left
    next_turns_cost: Decimal | None  # None when no price card prices the session
    model_id: str = ""  # the model whose window it is, when the caller knows it
    window_source: str = ""  # whose figure the window is (`ContextWindow.source`), when known
    estimated: bool = False  # a turn's tokens were estimated (its provider reported none)

    @property
    def few_left(self) -> bool:
        return self.turns_left is not None and self.turns_left < FEW_TURNS

    @property
    def cached_percent(self) -> int:
        return round(self.cached_share * 100)

    @property
    def window_label(self) -> str:
        return tokens_short(self.context_window)

    @property
    def growth_label(self) -> str:
        return f"{self.growth:,}"

    @property
    def answer_label(self) -> str:
        return f"{self.answer_tokens:,}"

    @property
    def last_prompt_label(self) -> str:
        return f"{self.last_prompt_tokens:,}"


def tokens_short(tokens: int) -> str:
    """A window as models are named: 128,000 and 131,072 (128 x 1,024) tokens are both "128k"."""
    if tokens >= 1000:
        thousands = tokens // 1024 if tokens % 1024 == 0 and tokens % 1000 else round(tokens / 1000)
        return f"{thousands:,}k"
    return str(tokens)


def prompt_growth_per_turn(prompts: Sequence[int], *, recent: int = RECENT_STEPS) -> int:
    """The median of the last `recent` increases between consecutive prompts (0 if none grew)."""
    steps = [after - before for before, after in pairwise(prompts) if after > before]
    return round(median(steps[-recent:])) if steps else 0


def turns_left(*, last_prompt: int, growth: int, answer: int, context_window: int) -> int | None:
    """How many more turns, each prompt `growth` longer than the last, leave room for `answer`."""
    if growth <= 0:
        return None
    return max(0, (context_window - answer - last_prompt) // growth)


def cached_share(turns: Sequence[Turn]) -> Decimal:
    """Cached over prompt tokens, over the turns whose cached count is known."""
    return _known_share(turns, [turn.cached_tokens for turn in turns])


def written_share(turns: Sequence[Turn]) -> Decimal:
    """Cache-written over prompt tokens, over the turns whose write count is known (0 with none:
    a provider that does not report writes bills them as fresh input)."""
    return _known_share(turns, [turn.cache_write_tokens for turn in turns])


def _known_share(turns: Sequence[Turn], counts: Sequence[int | None]) -> Decimal:
    known = [
        (turn.prompt_tokens, count) for turn, count in zip(turns, counts, strict=True) if count is not None
    ]
    prompt = sum(tokens for tokens, _ in known)
    if not prompt:
        return ZERO
    return Decimal(sum(count for _, count in known)) / Decimal(prompt)


def session_runway(
    turns: Sequence[Turn], *, context_window: int | None, card: PriceCard | None
) -> Runway | None:
    """The runway after `turns` (in order); None before two turns or without a known window."""
    if len(turns) < 2 or not context_window:
        return None
    last = turns[-1].prompt_tokens
    growth = prompt_growth_per_turn([turn.prompt_tokens for turn in turns])
    answer = round(median(turn.completion_tokens for turn in turns[-RECENT_STEPS:]))
    left = turns_left(last_prompt=last, growth=growth, answer=answer, context_window=context_window)
    share = cached_share(turns)
    priced = NEXT_TURNS if left is None else min(NEXT_TURNS, left)
    return Runway(
        turns=len(turns),
        last_prompt_tokens=last,
        growth=growth,
        answer_tokens=answer,
        context_window=context_window,
        cached_share=share,
        turns_left=left,
        next_turns=priced,
        next_turns_cost=_next_turns_cost(
            last=last,
            growth=growth,
            answer=answer,
            shares=(share, written_share(turns)),
            turns=priced,
            card=card,
        ),
    )


def _next_turns_cost(
    *,
    last: int,
    growth: int,
    answer: int,
    shares: tuple[Decimal, Decimal],
    turns: int,
    card: PriceCard | None,
) -> Decimal | None:
    """`shares`: the session's cached and cache-written shares of a prompt."""
    if card is None:
        return None
    cached_of, written_of = shares
    total = ZERO
    for ahead in range(1, turns + 1):
        prompt = last + ahead * growth
        cached = int(prompt * cached_of)
        usage = NormalizedUsage(
            prompt_tokens=prompt,
            completion_tokens=answer,
            cached_tokens=cached,
            cache_write_tokens=min(int(prompt * written_of), prompt - cached),
        )
        total += cost_for(usage=usage, card=card).total
    return total
