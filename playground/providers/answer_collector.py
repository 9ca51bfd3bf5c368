"""One reply, assembled from the normalized event stream: text, reasoning, tool calls.

Every feature that keeps an answer (a chat turn, a tool continuation, a compare column, a
batch item) feeds its events to an `AnswerCollector`. Tool calls arrive as pieces (`ToolCallDelta`) that are
put together by their `index`: the first piece of an index usually carries the id and the
name, the later ones more argument text. Ids are kept only to send back upstream: Kimi's
ids repeat within one reply and across turns, so nothing uses them as a key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from playground.lib.json_types import JSONValue
from playground.providers.events import (
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UpstreamError,
    UsageReport,
)
from playground.providers.usage_normalize import NormalizedUsage


class FunctionCallPart(TypedDict):
    name: str
    arguments: str  # JSON text


class ToolCallPart(TypedDict):
    """An OpenAI `tool_calls[]` item of an assistant message, as sent back upstream."""

    id: str
    type: Literal["function"]
    function: FunctionCallPart


@dataclass
class ToolCall:
    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""  # the JSON text as the model wrote it

    def parsed_arguments(self) -> tuple[JSONValue, str]:
        """(value, "") when the arguments are JSON, else (None, why not)."""
        try:
            return json.loads(self.arguments or "{}"), ""
        except ValueError as exc:
            return None, f"The arguments are not valid JSON: {exc}."

    def as_message_part(self) -> ToolCallPart:
        """The OpenAI `tool_calls[]` item sent back in the assistant message."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments or "{}"},
        }


@dataclass
class AnswerCollector:
    text_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    calls: dict[int, ToolCall] = field(default_factory=dict)
    finish_reason: str = ""
    error: UpstreamError | None = None
    usage: NormalizedUsage | None = None

    def observe(self, event: StreamEvent) -> None:
        match event:
            case TextDelta(text=text):
                self.text_parts.append(text)
            case ReasoningDelta(text=text):
                self.reasoning_parts.append(text)
            case ToolCallDelta():
                self._add_piece(event)
            case UsageReport(usage=usage):
                self.usage = usage
            case Finish(reason=reason):
                self.finish_reason = reason
            case UpstreamError():
                self.error = event

    def _add_piece(self, piece: ToolCallDelta) -> None:
        call = self.calls.setdefault(piece.index, ToolCall(index=piece.index))
        call.id = call.id or piece.id or ""
        call.name = call.name or piece.name or ""
        call.arguments += piece.arguments

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    @property
    def reasoning(self) -> str:
        return "".join(self.reasoning_parts)

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The calls in index order; pieces without a name (a closing delta) make no call."""
        return [self.calls[index] for index in sorted(self.calls) if self.calls[index].name]
