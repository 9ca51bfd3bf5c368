"""An answer's usage as the chat prints it: tokens, cache, cost, timings, status, and its stored request.

Every number shown in the chat (tokens, cached ratio, cost, timings) is formatted here, so the
rules ("unknown is not zero", the price card beside every cost, "estimated" when the provider
sent no usage) live in one place. Compare's columns print theirs with the same lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from playground.accounts.models import StoreMode
from playground.usage.metering import STOPPED_BY_USER
from playground.usage.models import UsageRecord, UsageSource, UsageStatus
from playground.usage.money import money
from playground.usage.records import RECORD_WRITE_FAILED

NOT_REPORTED = "—"
NOT_KEPT = "Not kept (sent before request bodies were recorded)."
NOT_KEPT_BY_MODE = "Not kept: the record keeps metadata only (the team's storage mode, on Team → Data)."
ESTIMATE_RULE = "counted from the text, about 4 characters per token."
SEPARATOR = " · "


@dataclass(frozen=True)
class UsageLine:
    """One answer's usage, ready to print: "1,234 in · 1,000 cached (81%) · 56 out · …"."""

    tokens_in: str
    cached: str
    cached_note: str
    written: str  # "3,100 written to cache"; empty unless the provider reported writes
    tokens_out: str
    cost: str
    price_label: str
    ttft: str
    latency: str
    estimated: bool
    estimated_note: str
    status: str
    status_label: str
    error_text: str
    http_status: int | None = None

    @property
    def is_ok(self) -> bool:
        return self.status == UsageStatus.OK

    @property
    def summary(self) -> str:
        parts = [self.tokens_in, self.cached, *filter(None, [self.written]), self.tokens_out, self.cost]
        parts += [part for part in (self.ttft, self.latency) if part]
        text = SEPARATOR.join(parts)
        return f"{text} (estimated)" if self.estimated else text


@dataclass(frozen=True)
class RequestView:
    """The "View request" panel: the body as sent (redacted), the reply's HTTP status, the usage received."""

    body: str
    http_status: str
    raw_usage: str
    streamed: bool


def usage_line(record: UsageRecord) -> UsageLine:
    card = record.price_card
    return UsageLine(
        tokens_in=f"{record.prompt_tokens:,} in",
        cached=cached_text(prompt_tokens=record.prompt_tokens, cached_tokens=record.cached_tokens),
        cached_note=(
            "The provider did not report cached tokens."
            if record.cached_tokens is None
            else "Input tokens served from the provider's prompt cache (billed at the cached rate)."
        ),
        written=f"{record.cache_write_tokens:,} written to cache" if record.cache_write_tokens else "",
        tokens_out=_tokens_out(record.completion_tokens, record.reasoning_tokens),
        cost=money(record.total_cost) if card is not None else "unpriced",
        price_label=record.price_label if card is not None else "No price card for this model and day",
        ttft=f"TTFT {duration_text(record.ttft_ms)}" if record.ttft_ms is not None else "",
        latency=duration_text(record.latency_ms) if record.latency_ms is not None else "",
        estimated=record.usage_source == UsageSource.ESTIMATED,
        estimated_note=_estimated_note(record),
        status=record.status,
        status_label=status_label(record.status, record.error_code),
        error_text=record.error_text,
        http_status=record.http_status,
    )


def _estimated_note(record: UsageRecord) -> str:
    """Why the figures are estimates: the three cases a user must tell apart."""
    if record.error_code == RECORD_WRITE_FAILED:
        return record.error_text
    if record.usage_implausible:
        return f"The provider's usage figures were absurd (not finite or out of range): {ESTIMATE_RULE}"
    return f"The provider sent no usage: {ESTIMATE_RULE}"


def cached_text(*, prompt_tokens: int, cached_tokens: int | None) -> str:
    """ "1,000 cached (81%)"; "— cached" when the provider did not say (unknown is not zero)."""
    if cached_tokens is None:
        return f"{NOT_REPORTED} cached"
    if prompt_tokens <= 0:
        return f"{cached_tokens:,} cached"
    share = round(100 * cached_tokens / prompt_tokens)
    return f"{cached_tokens:,} cached ({share}%)"


def duration_text(ms: int) -> str:
    """ "120 ms" below a second, "1.4 s" above."""
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.1f} s"


def status_label(status: str, error_code: str = "") -> str:
    """What the answer's badge says: a cancelled request reads "Stopped" when the user pressed
    Stop, and names the disconnect when the page went away mid-answer."""
    if status == UsageStatus.CLIENT_DISCONNECTED:
        return "Stopped" if error_code == STOPPED_BY_USER else "Stopped (client disconnected)"
    return UsageStatus(status).label if status in UsageStatus.values else status


def _not_kept(record: UsageRecord) -> str:
    return NOT_KEPT_BY_MODE if record.store_mode == StoreMode.METADATA else NOT_KEPT


def request_view(record: UsageRecord) -> RequestView:
    return RequestView(
        body=_pretty(record.request_body) if record.request_body is not None else _not_kept(record),
        http_status=str(record.http_status) if record.http_status is not None else NOT_REPORTED,
        raw_usage=_pretty(record.raw_usage) if record.raw_usage else "The provider sent no usage.",
        streamed=record.streamed,
    )


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _tokens_out(completion: int, reasoning: int | None) -> str:
    text = f"{completion:,} out"
    if reasoning:
        text += f" ({reasoning:,} reasoning)"
    return text
