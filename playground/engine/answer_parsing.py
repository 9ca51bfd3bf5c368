"""Reading the model's output as it is generated: stop sequences and tool-call lists."""

from __future__ import annotations

import json
from typing import Any

_DECODER = json.JSONDecoder()


class StopMatcher:
    """Releases text as it arrives, holding back what might be the start of a stop sequence."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self._pending = ""

    def feed(self, text: str) -> tuple[str, bool]:
        """(text safe to emit, whether a stop sequence was reached)."""
        self._pending += text
        hits = [index for stop in self.stops if (index := self._pending.find(stop)) >= 0]
        if hits:
            released, self._pending = self._pending[: min(hits)], ""
            return released, True
        hold = max(
            (
                size
                for stop in self.stops
                for size in range(1, len(stop))
                if self._pending.endswith(stop[:size])
            ),
            default=0,
        )
        cut = len(self._pending) - hold
        released, self._pending = self._pending[:cut], self._pending[cut:]
        return released, False

    def flush(self) -> str:
        released, self._pending = self._pending, ""
        return released


class ToolCallParser:
    """Picks complete `{"name": ..., "arguments": {...}}` objects out of a growing JSON list.

    The grammar guarantees the text is a valid list of such objects once finished, so a
    decoding failure here only ever means "this object is not complete yet".
    """

    def __init__(self) -> None:
        self.text = ""
        self._position = 0

    def feed(self, text: str) -> list[dict[str, Any]]:
        self.text += text
        complete: list[dict[str, Any]] = []
        while True:
            start = self._position
            while start < len(self.text) and self.text[start] in "[, \n\t":
                start += 1
            if start >= len(self.text) or self.text[start] != "{":
                return complete
            try:
                call, end = _DECODER.raw_decode(self.text, start)
            except ValueError:
                return complete
            self._position = end
            complete.append(call)
