"""Turns every usage shape a provider may send into one `NormalizedUsage`.

The one place that knows the shapes (see shared/reference/lessons.md):
- OpenAI / Workers AI: `prompt_tokens`, `completion_tokens`,
  `prompt_tokens_details.cached_tokens`, `completion_tokens_details.reasoning_tokens`;
- Anthropic style: `input_tokens` (excludes cache), `cache_read_input_tokens`,
  `cache_creation_input_tokens`, `output_tokens`;
- Moonshot's own API: top-level `cached_tokens`;
- `cache_write_tokens` (counted as fresh input).
A cache figure the provider did not send stays None: unknown is not zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class NormalizedUsage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)


def normalize_usage(raw: Mapping[str, Any]) -> NormalizedUsage:
    """One `NormalizedUsage` from any provider's usage object; `prompt_tokens` includes cached.

    Anthropic-style `input_tokens` excludes cache reads and writes, so they are added back;
    OpenAI-style `prompt_tokens` already includes them. A cached figure larger than the
    prompt (a provider bug) is clamped so a cost can never go negative.
    """
    cached = _first_int(_details(raw, "prompt_tokens_details").get("cached_tokens"), raw.get("cached_tokens"))
    cache_read = _int_or_none(raw.get("cache_read_input_tokens"))
    cache_write = _first_int(raw.get("cache_creation_input_tokens"), raw.get("cache_write_tokens")) or 0
    if "prompt_tokens" in raw:
        prompt = _int_or_none(raw.get("prompt_tokens")) or 0
        if cached is None:
            cached = cache_read
    else:
        fresh = _int_or_none(raw.get("input_tokens")) or 0
        cached = cache_read if cache_read is not None else cached
        prompt = fresh + (cached or 0) + cache_write
    completion = _first_int(raw.get("completion_tokens"), raw.get("output_tokens")) or 0
    reasoning = _first_int(
        _details(raw, "completion_tokens_details").get("reasoning_tokens"),
        _details(raw, "output_tokens_details").get("reasoning_tokens"),
        raw.get("reasoning_tokens"),
    )
    if cached is not None:
        cached = min(cached, prompt)
    return NormalizedUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=cached,
        reasoning_tokens=reasoning,
        raw=dict(raw),
    )


def _details(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key)
    return value if isinstance(value, Mapping) else {}


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return max(0, int(value))


def _first_int(*values: Any) -> int | None:
    for value in values:
        if (number := _int_or_none(value)) is not None:
            return number
    return None
