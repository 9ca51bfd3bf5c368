"""Watches one upstream request's event stream and says what its usage record must hold.

Every path that calls an upstream (chat turns, tool continuations, compare columns, batch
items, the gateway) goes through the one metered call, which feeds its events to a
`UsageMeter` and writes the meter's `outcome()` into the record, so timing, status and the
estimated-versus-reported rule live in one place.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from playground.providers.events import (
    Finish,
    ReasoningDelta,
    Replayed,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UpstreamError,
    UsageReport,
)
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.models import UsageSource, UsageStatus

# The error code of a record whose request the user stopped (Stop in the chat); its status is
# client_disconnected as for a closed page, and this tells the two apart.
STOPPED_BY_USER = "stopped_by_user"
# A rough, provider-independent rule for text we must estimate (no usage was sent).
CHARS_PER_TOKEN = 4
# A request reads and writes at most its model's context window; the catalogue's figure may be
# a little off, so only a report more than this many times the window is called absurd.
CONTEXT_WINDOW_SLACK = 2


@dataclass(frozen=True)
class Outcome:
    status: str
    usage: NormalizedUsage
    usage_source: str
    ttft_ms: int | None
    latency_ms: int
    upstream_request_id: str = ""
    http_status: int | None = None
    error_code: str = ""
    error_text: str = ""
    # The answer's whole text, kept only when the request asked for a JSON response format
    # (`UsageMeter(keep_text=True)`): the record checks it against that format. None: not kept.
    answer_text: str | None = None


class UsageMeter:
    def __init__(
        self, *, prompt_chars: int, context_window: int | None = None, keep_text: bool = False
    ) -> None:
        self._prompt_chars = prompt_chars
        self._context_window = context_window
        self._started = time.perf_counter()
        self._first_token_at: float | None = None
        self._output_chars = 0
        self._usage: NormalizedUsage | None = None
        self._finish: Finish | None = None
        self._error: UpstreamError | None = None
        self._turnaround_ms: int | None = None
        self._text: list[str] | None = [] if keep_text else None

    def observe(self, event: StreamEvent) -> None:
        match event:
            case TextDelta(text=text):
                self._first_output(len(text))
                if self._text is not None:
                    self._text.append(text)
            case ReasoningDelta(text=text):
                self._first_output(len(text))
            case ToolCallDelta(arguments=arguments, name=name):
                self._first_output(len(arguments) + len(name or ""))
            case UsageReport(usage=usage):
                self._usage = usage
            case Finish():
                self._finish = event
            case UpstreamError():
                self._error = event
            case Replayed(turnaround_ms=turnaround_ms):
                self._turnaround_ms = turnaround_ms

    def _first_output(self, chars: int) -> None:
        if self._first_token_at is None:
            self._first_token_at = time.perf_counter()
        self._output_chars += chars

    @property
    def ttft_ms(self) -> int | None:
        if self._first_token_at is None or self._turnaround_ms is not None:
            return None
        return _ms(self._first_token_at - self._started)

    def _latency_ms(self) -> int:
        if self._turnaround_ms is not None:
            return self._turnaround_ms
        return _ms(time.perf_counter() - self._started)

    def outcome(
        self, *, cancelled: bool = False, stopped_by_user: bool = False, rejected_reason: str = ""
    ) -> Outcome:
        """The record's content. `cancelled`: the client went away before the end, or, with
        `stopped_by_user`, asked to stop; once the upstream's finish was seen, a cancellation
        changes nothing (a gateway client hangs up the moment it reads `[DONE]`)."""
        status = self._status(cancelled=cancelled, rejected=bool(rejected_reason))
        stopped = stopped_by_user and status == UsageStatus.CLIENT_DISCONNECTED
        usage, source = self._usage_and_source(billed=self._prompt_was_processed(status))
        error = self._error
        return Outcome(
            status=status,
            usage=usage,
            usage_source=source,
            ttft_ms=self.ttft_ms,
            latency_ms=self._latency_ms(),
            upstream_request_id=(error.upstream_request_id if error else "")
            or (self._finish.upstream_request_id if self._finish else ""),
            http_status=error.http_status if error else (self._finish.http_status if self._finish else None),
            error_code=STOPPED_BY_USER if stopped else (error.code if error else ""),
            error_text=rejected_reason or (error.message if error else ""),
            answer_text="".join(self._text) if self._text is not None else None,
        )

    def _status(self, *, cancelled: bool, rejected: bool) -> str:
        if rejected:
            return UsageStatus.REJECTED
        if cancelled and self._finish is None:  # after the finish, the answer was whole
            return UsageStatus.CLIENT_DISCONNECTED
        if self._error is None:
            return UsageStatus.OK if self._finish is not None else UsageStatus.UPSTREAM_ERROR
        if self._error.is_timeout:
            return UsageStatus.TIMEOUT
        if self._error.http_status == 429:
            return UsageStatus.REJECTED
        return UsageStatus.UPSTREAM_ERROR

    def _prompt_was_processed(self, status: str) -> bool:
        """Whether an estimate should count the prompt: an upstream that failed before its
        first token (a 5xx, a timeout, a 429) has not been shown to have read it."""
        if status in (UsageStatus.OK, UsageStatus.CLIENT_DISCONNECTED):
            return True
        return status != UsageStatus.REJECTED and self._first_token_at is not None

    def _usage_and_source(self, *, billed: bool) -> tuple[NormalizedUsage, str]:
        """The provider's figures, else an estimate of what was sent and received so far.

        Implausible figures count as none: the estimate keeps their raw report and is flagged.
        """
        reported = self._usage
        if reported is not None and self._plausible(reported):
            return reported, UsageSource.PROVIDER
        estimate = NormalizedUsage(
            prompt_tokens=estimate_tokens(self._prompt_chars) if billed else 0,
            completion_tokens=estimate_tokens(self._output_chars),
            raw=reported.raw if reported is not None else {},
            implausible=reported is not None,
        )
        return estimate, UsageSource.ESTIMATED

    def _plausible(self, usage: NormalizedUsage) -> bool:
        """Not flagged by the normalizer, nor far (over twice) above the model's context window."""
        window = self._context_window
        total = usage.prompt_tokens + usage.completion_tokens
        return not usage.implausible and (window is None or total <= CONTEXT_WINDOW_SLACK * window)


def estimate_tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))
