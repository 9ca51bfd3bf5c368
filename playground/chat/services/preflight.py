"""The pre-flight cost: what the next turn would cost, shown in the composer as the user types.

The request is the one Send would make (`turn_request_build`: history, settings, the draft and
its images), its prompt counted by the model's tokenizer where one is known, else estimated as
the meter estimates it (`usage.token_count`; the line says which). Two figures, both from the
one cost function (`usage.estimates`) and the card that would price the record:

- at most: the prompt with no cached token (all of it written to the cache when the card
  prices writes above input) and `max_tokens` of output, which is also what the budget holds
  before sending (`usage.budgets.worst_case`);
- expected: the prompt with the cached share this conversation's answered turns have had, and
  an answer as long as their average (at most `max_tokens`). A conversation with no answered
  turn yet (a first turn, a fork) is expected from the team's chat turns on the same model in
  the last week; with none of those either, from `max_tokens` and no cached token. The line says
  which (`Preflight.basis`).

And whether Send would be refused before anything is sent: a prompt and `max_tokens` that do
not fit the model's context window on the connection (as served, else the catalogue's:
`providers.context_windows`), or a worst case the sender's budget (the team's or their own)
no longer covers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.utils import timezone

from playground.chat.models import Conversation
from playground.chat.selectors import UsageSoFar, conversation_usage_so_far, team_recent_chat_usage
from playground.chat.services.history import CURRENT_LEAF
from playground.chat.services.turns import attachments_to_send, turn_request_build
from playground.presets.variables import VariablesUnfilled
from playground.providers.adapters import ChatRequest
from playground.providers.context_windows import ContextWindow, context_window_for
from playground.providers.models import ProviderConnection
from playground.usage.budgets import budget_headroom
from playground.usage.budgets.worst_case import request_max_tokens, request_max_tokens_asked
from playground.usage.estimates import CostEstimate, cost_estimate, worst_case_estimate
from playground.usage.pricing import ZERO
from playground.usage.records import price_card_known
from playground.usage.token_count import TokenCount, prompt_tokens_count, window_overrun

# From this share of the context window on, the composer warns that the prompt nears it.
CONTEXT_WARNING_SHARE = 0.8


# What "expected" is taken from.
CONVERSATION, TEAM, NOTHING = "conversation", "team", "nothing"


@dataclass(frozen=True)
class Preflight:
    at_most: CostEstimate
    expected: CostEstimate
    so_far: UsageSoFar  # the turns "expected" is taken from: the conversation's, else the team's
    basis: str  # CONVERSATION, TEAM or NOTHING
    prompt: TokenCount  # the prompt's tokens, counted or estimated
    window: ContextWindow | None  # the model's on the connection; None: unknown
    window_overrun: str = ""  # why Send would be refused for length ("": it fits, or no window)
    max_tokens_asked: bool = False  # the request sets max_tokens (lowering it is a way to fit)
    budget_refusal: str | None = None  # what the budget would answer Send now; None: it fits

    @property
    def cache_share(self) -> Decimal:
        return _share(self.so_far)

    @property
    def prompt_tokens(self) -> int:
        return self.prompt.tokens

    @property
    def context_window(self) -> int | None:
        return self.window.tokens if self.window is not None else None

    @property
    def cache_percent(self) -> int:
        return round(self.cache_share * 100)

    @property
    def window_percent(self) -> int | None:
        share = self.window_share
        return None if share is None else round(share * 100)

    @property
    def counts(self) -> dict[str, str]:
        """The token counts as the line shows them (thousands grouped)."""
        return {
            "prompt": f"{'' if self.prompt.counted else '~'}{self.prompt_tokens:,}",
            "max_tokens": f"{self.at_most.output_tokens:,}",
            "answer": f"{self.expected.output_tokens:,}",
            "window": f"{self.context_window:,}" if self.context_window else "",
        }

    @property
    def window_share(self) -> float | None:
        return self.prompt_tokens / self.context_window if self.context_window else None

    @property
    def near_window(self) -> bool:
        share = self.window_share
        return share is not None and share >= CONTEXT_WARNING_SHARE

    @property
    def over_window(self) -> bool:
        """Send would be refused: the turn service refuses it (`require_fits_context`)."""
        return bool(self.window_overrun)


class PreflightUnavailable(Exception):
    """The next request cannot be built (no connection, an image the model cannot read, ...)."""


class PreflightRefused(PreflightUnavailable):
    """The next request would be refused as the draft stands (a variable it uses is not filled)."""


def preflight_for(
    *,
    conversation: Conversation,
    sender_id: int,
    text: str,
    attachment_ids: Sequence[int] = (),
    after: int = CURRENT_LEAF,
) -> Preflight:
    """The next turn's figures for the draft `text` and images, after the message `after` (the
    last one on the page), sent by the user `sender_id` (whose budget it is held on). Raises
    `PreflightUnavailable`."""
    if conversation.connection is None:
        raise PreflightUnavailable("This conversation's connection was deleted.")
    try:
        attachments = attachments_to_send(conversation, attachment_ids)
        request = turn_request_build(
            conversation=conversation,
            text=text.strip(),
            attachments=attachments,
            image_bytes=False,
            after=after,
        )
    except VariablesUnfilled as exc:
        raise PreflightRefused(" ".join(exc.messages)) from None
    except ValidationError as exc:
        raise PreflightUnavailable(" ".join(exc.messages)) from None
    return request_preflight(
        request=request,
        connection=conversation.connection,
        team_id=conversation.team_id,
        sender_id=sender_id,
        own=conversation_usage_so_far(conversation=conversation),
    )


def request_preflight(
    *,
    request: ChatRequest,
    connection: ProviderConnection | None,
    team_id: int,
    sender_id: int,
    own: UsageSoFar,
) -> Preflight:
    """The figures of `request`, about to be sent on `connection` (None: deleted, so estimated
    against the catalogue's window) for the team `team_id` by
    `sender_id`: `own` is what the turns before it used (a conversation's, a compare column's);
    with none, the team's chat turns on the model this week stand in (`Preflight.basis` says
    which). Blocking: the engine may be asked for the count and the window."""
    today = timezone.now().date()
    card = price_card_known(model_id=request.model, day=today, team_id=team_id)
    counted = prompt_tokens_count(connection=connection, request=request)
    prompt = counted.tokens
    max_tokens = request_max_tokens(request)
    asked = request_max_tokens_asked(request)
    so_far, basis = own, CONVERSATION
    if not so_far.turns:
        so_far = team_recent_chat_usage(team_id=team_id, model_id=request.model)
        basis = TEAM if so_far.turns else NOTHING
    answer = min(max_tokens, round(so_far.completion_tokens / so_far.turns)) if so_far.turns else max_tokens
    window = context_window_for(connection=connection, model_id=request.model, day=today)
    at_most = worst_case_estimate(card=card, prompt_tokens=prompt, output_tokens=max_tokens)
    headroom = budget_headroom(team_id=team_id, user_id=sender_id)
    return Preflight(
        at_most=at_most,
        expected=cost_estimate(
            card=card, prompt_tokens=prompt, output_tokens=answer, cache_share=_share(so_far)
        ),
        so_far=so_far,
        basis=basis,
        prompt=counted,
        window=window,
        window_overrun=window_overrun(prompt=counted, max_tokens=asked, window=window),
        max_tokens_asked=asked is not None,
        budget_refusal=headroom.refusal(at_most.cost or ZERO) if headroom is not None else None,
    )


def _share(so_far: UsageSoFar) -> Decimal:
    """The share of prompt tokens that were cached over the conversation's answered turns."""
    if not so_far.prompt_tokens:
        return Decimal(0)
    return Decimal(so_far.cached_tokens) / Decimal(so_far.prompt_tokens)
