"""A reply that already arrived (a queued item's result), replayed as the normalized event stream.

Workers AI's queue hands back each item's whole output in a poll. `QueuedResultReply` feeds
it through the same `EventAssembler` as a live JSON reply, so a batch item's text, tool calls,
usage (and its normalization) and errors are read exactly as chat reads them, and the same
meter and record writer see them. `body_as_sent` is the body of the adapter that queued it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from playground.providers.adapters.assembly import EventAssembler
from playground.providers.adapters.base import ChatAdapter
from playground.providers.adapters.frames import error_details, unwrap_envelope
from playground.providers.adapters.request import ChatRequest
from playground.providers.events import Replayed, StreamEvent, UpstreamError
from playground.providers.http import UpstreamHTTPError
from playground.providers.secrets import redact
from playground.providers.upstream_redaction import TextRedactor


class QueuedResultReply:
    def __init__(
        self,
        *,
        result: Any,
        success: bool,
        sent_by: ChatAdapter,
        request_id: str = "",
        token: str = "",
        turnaround_ms: int | None = None,
    ) -> None:
        self.result = result
        self.success = success
        self.sent_by = sent_by
        self.request_id = request_id
        self.turnaround_ms = turnaround_ms
        self._secrets = [token] if token else []

    def body_as_sent(self, request: ChatRequest) -> dict[str, Any]:
        return self.sent_by.body_as_sent(request)

    def upstream_redacted(self, request: ChatRequest, text: TextRedactor) -> ChatRequest:
        return self.sent_by.upstream_redacted(request, text)  # as the adapter that queued it sent it

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent]:
        if self.turnaround_ms is not None:
            yield Replayed(turnaround_ms=self.turnaround_ms)
        try:
            events = self._events()
        except UpstreamHTTPError as exc:
            yield self._error(exc)
            return
        for event in events:
            yield event

    def _events(self) -> list[StreamEvent]:
        if not self.success:
            code, message = error_details(self.result)
            raise UpstreamHTTPError(message or "The upstream reported that this item failed.", code=code)
        assembler = EventAssembler(request_id=self.request_id)
        events = assembler.feed(unwrap_envelope(_output(self.result)))
        return [*events, *assembler.finish(complete=True)]

    def _error(self, exc: UpstreamHTTPError) -> UpstreamError:
        code, message = error_details(_json_or_none(exc.body)) if exc.body else ("", "")
        return UpstreamError(
            message=redact(message or exc.message, self._secrets),
            http_status=exc.status,
            code=code or exc.code,
            upstream_request_id=self.request_id,
        )


def _output(result: Any) -> Any:
    """The model output: some models nest it once more (`result.result.response`; see
    docs/reference/workers-ai-api.md §7)."""
    while (
        isinstance(result, Mapping)
        and isinstance(result.get("result"), Mapping)
        and not any(key in result for key in ("choices", "response", "tool_calls"))
        and "success" not in result
    ):
        result = result["result"]
    return result


def _json_or_none(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None
