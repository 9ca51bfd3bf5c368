"""Decoded reply chunks made into normalized events, in order, with one merged usage report at the end."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NoReturn

from playground.providers.adapters.frames import raise_for_error
from playground.providers.events import (
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UsageReport,
)
from playground.providers.http import UpstreamHTTPError
from playground.providers.usage_normalize import normalize_usage

CACHE_KEYS = ("cached_tokens", "cache_read_input_tokens")


class EventAssembler:
    """Turns decoded chunks of one reply into events, in order, with one usage report at the end.

    Chunks may be OpenAI `chat.completion.chunk` (`choices[].delta`), a whole
    `chat.completion` (`choices[].message`), or Workers AI native frames (`response`,
    top-level `tool_calls`). A frame with non-empty `choices` is read only through them:
    some Workers AI frames repeat the text in `response`, and reading both doubles it.
    Usage may arrive twice (a chunk with empty `choices`, then a native trailer); the
    reports are merged, never added.
    """

    def __init__(self, *, request_id: str = "", http_status: int | None = None) -> None:
        self.request_id = request_id
        self.http_status = http_status
        self.finish_reason = ""
        self.saw_tool_call = False
        self.usages: list[Mapping[str, Any]] = []

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        if chunk.get("error") or (chunk.get("errors") and chunk.get("success") is False):
            raise_for_error(chunk)
        if not self.request_id and isinstance(chunk.get("id"), str):
            self.request_id = chunk["id"]
        if isinstance(usage := chunk.get("usage"), Mapping):
            self.usages.append(usage)
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices:
            return [event for choice in choices for event in self._choice_events(choice)]
        return self._native_events(chunk)

    def finish(self, *, complete: bool) -> list[StreamEvent]:
        """The usage report and the `Finish`, once the reply ended.

        `complete`: the reply ended as it should ([DONE], or a whole JSON body). A stream
        that just stops, with no finish reason, no usage and no [DONE], was cut short.
        """
        if not (complete or self.finish_reason or self.usages):
            raise UpstreamHTTPError(
                "The stream ended before the model finished.",
                code="stream_incomplete",
                request_id=self.request_id,
            )
        events: list[StreamEvent] = []
        usage = normalize_usage(merge_usage(self.usages)) if self.usages else None
        if usage is not None:
            events.append(UsageReport(usage))
        reason = self.finish_reason or ("tool_calls" if self.saw_tool_call else "stop")
        events.append(
            Finish(reason=reason, upstream_request_id=self.request_id, http_status=self.http_status)
        )
        return events

    def _choice_events(self, choice: Any) -> list[StreamEvent]:
        if not isinstance(choice, Mapping):
            return []
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        delta = choice.get("delta") or choice.get("message") or {}
        if not isinstance(delta, Mapping):
            _raise_malformed("a choice's delta is not an object")
        events: list[StreamEvent] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            events.append(ReasoningDelta(reasoning))
        if isinstance(content := delta.get("content"), str) and content:
            events.append(TextDelta(content))
        events.extend(self._tool_call_events(delta.get("tool_calls")))
        return events

    def _native_events(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        response = chunk.get("response")
        if isinstance(response, str) and response:
            events.append(TextDelta(response))
        elif isinstance(response, Mapping | list):  # JSON mode answers with an object
            events.append(TextDelta(json.dumps(response)))
        events.extend(self._tool_call_events(chunk.get("tool_calls")))
        return events

    def _tool_call_events(self, tool_calls: Any) -> list[StreamEvent]:
        events = _parse_tool_calls(tool_calls)
        self.saw_tool_call = self.saw_tool_call or bool(events)
        return events


def merge_usage(usages: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One usage dict from several reports of the same reply.

    The last report that carries a cache figure wins (otherwise the last one); fields it
    lacks are filled from the others. Figures are never summed.
    """
    primary = next((usage for usage in reversed(usages) if _has_cache_figure(usage)), usages[-1])
    merged: dict[str, Any] = {}
    for usage in usages:
        merged.update({key: value for key, value in usage.items() if value is not None})
    merged.update(primary)
    return merged


def _has_cache_figure(usage: Mapping[str, Any]) -> bool:
    details = usage.get("prompt_tokens_details")
    if isinstance(details, Mapping) and details.get("cached_tokens") is not None:
        return True
    return any(usage.get(key) is not None for key in CACHE_KEYS)


def _parse_tool_calls(tool_calls: Any) -> list[StreamEvent]:
    if not isinstance(tool_calls, list):
        return []
    events: list[StreamEvent] = []
    for position, call in enumerate(tool_calls):
        if not isinstance(call, Mapping):
            continue
        nested = call.get("function")
        function: Mapping[str, Any] = nested if isinstance(nested, Mapping) else call  # native: flat
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):  # native frames send the arguments as an object
            arguments = json.dumps(arguments)
        index = call.get("index")
        events.append(
            ToolCallDelta(
                index=index if isinstance(index, int) else position,
                id=_optional_text(call.get("id"), "a tool call's id"),
                name=_optional_text(function.get("name"), "a tool call's name"),
                arguments=arguments,
            )
        )
    return events


def _optional_text(value: Any, what: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        _raise_malformed(f"{what} is not text")
    return value


def _raise_malformed(what: str) -> NoReturn:
    raise UpstreamHTTPError(f"The upstream sent a malformed reply: {what}.", code="malformed_reply")
