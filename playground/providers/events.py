"""The one normalized stream of events that every provider adapter yields."""

from __future__ import annotations

from dataclasses import dataclass, field

from playground.providers.usage_normalize import NormalizedUsage


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of one tool call; `id` and `name` usually come only in the first piece."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True)
class UsageReport:
    usage: NormalizedUsage


@dataclass(frozen=True)
class Finish:
    reason: str
    upstream_request_id: str = ""
    # The reply's HTTP status (kept on the usage record); not part of what the reply said.
    http_status: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class UpstreamError:
    """The upstream failed; `message` is already redacted."""

    message: str
    http_status: int | None = None
    code: str = ""
    is_timeout: bool = False
    upstream_request_id: str = ""
    retry_after: float | None = None  # seconds, when the upstream said (Retry-After)


# Workers AI's codes for a request at fault: invalid input (a value out of range, a bad
# shape) and request too large (docs/reference/workers-ai-api.md §8; the embedded engine answers the same).
REQUEST_AT_FAULT_CODES = frozenset({"8001", "3006"})
REQUEST_AT_FAULT_STATUSES = frozenset({400, 413, 422})


def request_at_fault(*, http_status: int | None, code: str) -> bool:
    """Whether an upstream error blames the request itself (its parameters, its size), so the
    same request sent again fails the same way. Auth, rate and server errors do not."""
    return http_status in REQUEST_AT_FAULT_STATUSES or code in REQUEST_AT_FAULT_CODES


@dataclass(frozen=True)
class Replayed:
    """The answer arrived whole, after the fact (a queued request's result, read from a poll).

    Its events come at our pace, not the model's: there is no time to first token, and the
    latency is the upstream's turnaround, from submission to the poll that brought the result.
    """

    turnaround_ms: int


@dataclass(frozen=True)
class WireHead:
    """A pass-through request's upstream answered 2xx: what the reply will be relayed as.

    Only a `PassthroughAdapter` (the gateway) yields this and `WireBytes`; everyone else
    ignores them (the meter reads the normalized events that come with them)."""

    status: int
    content_type: str
    upstream_request_id: str = ""


@dataclass(frozen=True)
class WireBytes:
    """Bytes of the upstream's reply exactly as they arrived, to relay unchanged."""

    data: bytes


StreamEvent = (
    TextDelta
    | ReasoningDelta
    | ToolCallDelta
    | UsageReport
    | Finish
    | UpstreamError
    | Replayed
    | WireHead
    | WireBytes
)
