"""What a request could cost at most, the amount its budget reservation holds.

Worst case = estimated prompt tokens x the input price (no cache discount; the cache-write
price when the card's is higher, as every prompt token may be written) + max_tokens x the
output price, with the price card that will price the record (the team's override when
one applies). A request without max_tokens is reserved at `BUDGET_DEFAULT_MAX_TOKENS`
output tokens: an answer longer than that may overshoot the budget by the difference, which
the reconcile step then counts in full.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from playground.providers.adapters import ChatRequest
from playground.usage.estimates import worst_case_estimate
from playground.usage.metering import estimate_tokens
from playground.usage.pricing import ZERO, KnownCard
from playground.usage.records import price_card_known


def request_max_tokens(request: ChatRequest) -> int:
    """The output tokens a request may produce: its max_tokens, else the documented default cap."""
    asked = request_max_tokens_asked(request)
    return asked if asked is not None else int(settings.BUDGET_DEFAULT_MAX_TOKENS)


def request_max_tokens_asked(request: ChatRequest) -> int | None:
    """The request's own max_tokens (or max_completion_tokens); None when it sets none."""
    for value in (
        request.max_tokens,
        request.parameters.get("max_tokens"),
        request.parameters.get("max_completion_tokens"),
    ):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def request_worst_case_cost(
    *, request: ChatRequest, team_id: int, model_id: str, card: KnownCard | None = None
) -> Decimal:
    """Prompt estimate x the dearer of the input and cache-write prices + max tokens x output
    price (zero for an unpriced model).

    `card`: the card that will price the record, when the caller has looked it up already (a
    batch submission reserves its items' worst cases by one card); otherwise today's.
    """
    known = card or price_card_known(model_id=model_id, day=timezone.now().date(), team_id=team_id)
    estimate = worst_case_estimate(
        card=known,
        prompt_tokens=estimate_tokens(request.prompt_chars),
        output_tokens=request_max_tokens(request),
    )
    return estimate.cost or ZERO
