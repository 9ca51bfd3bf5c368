"""Turns every usage shape a provider may send into one `NormalizedUsage`.

The one place that knows the shapes (see docs/reference/lessons.md):
- OpenAI / Workers AI: `prompt_tokens`, `completion_tokens`,
  `prompt_tokens_details.cached_tokens`, `completion_tokens_details.reasoning_tokens`;
- Anthropic style: `input_tokens` (excludes cache), `cache_read_input_tokens`,
  `cache_creation_input_tokens`, `output_tokens`;
- LiteLLM: OpenAI's `prompt_tokens` (cache reads and writes included) beside a top-level
  `cache_creation_input_tokens`;
- OpenRouter: `prompt_tokens_details.cache_write_tokens` (or a top-level `cache_write_tokens`);
- Moonshot's own API: top-level `cached_tokens`.
Workers AI does not separate cache writes from fresh input, so its writes stay unknown.
A cache figure the provider did not send stays None: unknown is not zero. A figure that is
sent but is not a finite count the usage columns can hold (NaN, Infinity, a string, a
negative number, more than `MAX_TOKENS`) makes the whole report `implausible`: its counts
are unknown (zero, cached None) and the meter estimates instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from playground.lib.storable import storable_json

# The largest count a usage column holds (PostgreSQL `integer`); no real request comes near it.
MAX_TOKENS = 2**31 - 1


@dataclass(frozen=True)
class NormalizedUsage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None  # of `prompt_tokens`, apart from the cached ones
    reasoning_tokens: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)  # JSON-safe: storable in jsonb
    implausible: bool = False  # a figure was absurd: the counts are unknown, `raw` says why


def normalize_usage(raw: Mapping[str, Any]) -> NormalizedUsage:
    """One `NormalizedUsage` from any provider's usage object; `prompt_tokens` includes cached
    and written tokens.

    Anthropic-style `input_tokens` excludes cache reads and writes, so they are added back;
    OpenAI-style `prompt_tokens` already includes them. Cached and written figures larger than
    the prompt (a provider bug) are clamped, cached first, so a fresh count (prompt - cached -
    written) and a cost can never go negative.
    """
    figures = _Figures()
    details = _details(raw, "prompt_tokens_details")
    cached = figures.first(details.get("cached_tokens"), raw.get("cached_tokens"))
    cache_read = figures.first(raw.get("cache_read_input_tokens"))
    cache_write = figures.first(
        raw.get("cache_creation_input_tokens"),
        details.get("cache_write_tokens"),
        raw.get("cache_write_tokens"),
    )
    if "prompt_tokens" in raw:
        prompt = figures.first(raw.get("prompt_tokens")) or 0
        if cached is None:
            cached = cache_read
    else:
        fresh = figures.first(raw.get("input_tokens")) or 0
        cached = cache_read if cache_read is not None else cached
        prompt = fresh + (cached or 0) + (cache_write or 0)
    completion = figures.first(raw.get("completion_tokens"), raw.get("output_tokens")) or 0
    reasoning = figures.first(
        _details(raw, "completion_tokens_details").get("reasoning_tokens"),
        _details(raw, "output_tokens_details").get("reasoning_tokens"),
        raw.get("reasoning_tokens"),
    )
    safe_raw = storable_json(raw)
    if figures.implausible or prompt > MAX_TOKENS:
        return NormalizedUsage(prompt_tokens=0, completion_tokens=0, raw=safe_raw, implausible=True)
    if cached is not None:
        cached = min(cached, prompt)
    if cache_write is not None:
        cache_write = min(cache_write, prompt - (cached or 0))
    return NormalizedUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=cached,
        cache_write_tokens=cache_write,
        reasoning_tokens=reasoning,
        raw=safe_raw,
    )


def _details(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key)
    return value if isinstance(value, Mapping) else {}


class _Figures:
    """Reads count figures, remembering whether any present one was absurd."""

    def __init__(self) -> None:
        self.implausible = False

    def first(self, *values: Any) -> int | None:
        """The first of `values` that is present (not None), as a count; None if none is."""
        for value in values:
            if value is not None:
                return self._count(value)
        return None

    def _count(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_TOKENS:
            self.implausible = True  # NaN fails the range test too
            return 0
        return int(value)
