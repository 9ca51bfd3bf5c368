"""A request's prompt tokens before it is sent: counted by the model's tokenizer, else estimated.

The one count the pre-flight, the send check and the batch preview take. Counted where the
providers floor knows the model's tokenizer (`providers.tokenizers`: the engine's tokenize
route, tiktoken for OpenAI's models); estimated otherwise, as the meter estimates a request
whose provider reports no usage (`metering.estimate_tokens`: about 4 characters a token).
Each count says which it is, and the pages say "estimated" only for those.

`window_overrun` is the one rule for "it cannot fit" (the send check, the pre-flight, the
batch preview): the prompt and the `max_tokens` it asks for (at least one token of answer when
it asks for none) must fit the model's context window on the connection
(`providers.context_windows`: as served, else the catalogue's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from playground.providers.adapters import ChatRequest
from playground.providers.context_windows import ContextWindow
from playground.providers.models import ProviderConnection
from playground.providers.tokenizers import tokenizer_counts
from playground.usage.metering import estimate_tokens


@dataclass(frozen=True)
class TokenCount:
    tokens: int
    counted: bool  # by the model's tokenizer; False: estimated from the characters

    @property
    def basis(self) -> str:
        return "counted" if self.counted else "estimated"


def prompt_tokens_counts(
    *, connection: ProviderConnection | None, requests: Sequence[ChatRequest]
) -> list[TokenCount]:
    """Each request's prompt tokens on `connection` (None: a deleted one, estimated). Blocking:
    the engine is asked over HTTP (a short timeout, then the estimate)."""
    counted: list[int | None] = [None] * len(requests)
    if connection is not None:
        counted = tokenizer_counts(connection=connection, requests=requests)
    return [
        TokenCount(count, counted=True)
        if count is not None
        else TokenCount(estimate_tokens(request.prompt_chars), counted=False)
        for request, count in zip(requests, counted, strict=True)
    ]


def prompt_tokens_count(*, connection: ProviderConnection | None, request: ChatRequest) -> TokenCount:
    return prompt_tokens_counts(connection=connection, requests=[request])[0]


def window_overrun(*, prompt: TokenCount, max_tokens: int | None, window: ContextWindow | None) -> str:
    """Why `prompt` and `max_tokens` of answer cannot fit `window`, as a clause ("the prompt is
    ..."); "" when they fit, or when the window is unknown (nothing is checked then)."""
    if window is None or prompt.tokens + (max_tokens or 1) <= window.tokens:
        return ""
    answer = f" and max_tokens asks for {max_tokens:,} more" if max_tokens else ""
    return (
        f"the prompt is {prompt.tokens:,} tokens ({prompt.basis}){answer}, but the model's context "
        f"window is {window.tokens:,} tokens ({window.source})"
    )
