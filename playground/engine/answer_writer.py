"""Turns the bytes a replica generates into job events, according to the output mode.

Text is released as it is decoded (held back only while it might be the start of a stop
sequence). Tool calls are released one whole call at a time, after their arguments have
been checked against the tool's schema, so a client never sees arguments that do not
validate, not even in a stream cut short by `max_tokens`. A call identical to an earlier
one in the same answer ends the list: it would only repeat work, and small models fall
into exactly that loop.
"""

from __future__ import annotations

import codecs
import json
import uuid
from collections.abc import Callable
from typing import Any

from jsonschema.validators import validator_for

from playground.engine.answer_parsing import StopMatcher, ToolCallParser
from playground.engine.errors import EngineError
from playground.engine.protocol import Event, GenerationSpec, TextDelta, ToolCall


class AnswerWriter:
    def __init__(self, spec: GenerationSpec, emit: Callable[[Event], None]) -> None:
        self.spec = spec
        self.mode = spec.mode  # "auto" becomes "text" or "tools" once the first text is known
        self._emit = emit
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stops = StopMatcher(spec.stop)
        self._calls = ToolCallParser()
        self._seen_calls: set[tuple[str, str]] = set()
        self._json_parts: list[str] = []

    def feed(self, piece: bytes) -> bool:
        """Take one token's bytes; True when a stop sequence has ended the answer."""
        return self._take(self._decoder.decode(piece))

    def finish(self, reason: str) -> str:
        """Flush what is held back and return the finish reason to report."""
        self._take(self._decoder.decode(b"", final=True))
        if self.mode in ("text", "auto"):
            if tail := self._stops.flush():
                self._emit(TextDelta(tail))
            return reason
        if self.mode == "tools":
            return "tool_calls" if reason == "stop" and self._seen_calls else reason
        if reason == "stop" and self.spec.response_schema is not None:
            _check(
                json.loads("".join(self._json_parts)), self.spec.response_schema, "the response_format schema"
            )
        return reason

    def _take(self, text: str) -> bool:
        if not text:
            return False
        if self.mode == "auto":
            self.mode = "tools" if text.startswith("[") else "text"
        if self.mode == "tools":
            return any(self._emit_call(call) for call in self._calls.feed(text))
        if self.mode == "json":
            self._json_parts.append(text)
            self._emit(TextDelta(text))
            return False
        released, stopped = self._stops.feed(text)
        if released:
            self._emit(TextDelta(released))
        return stopped

    def _emit_call(self, call: dict[str, Any]) -> bool:
        """Emit one complete call; True when it repeats an earlier one and so ends the list."""
        name = call["name"]
        _check(call["arguments"], self.spec.tool_schemas[name], f"the parameters of tool {name!r}")
        arguments = json.dumps(call["arguments"], ensure_ascii=False, separators=(",", ":"))
        if (name, arguments) in self._seen_calls:
            return True
        index = len(self._seen_calls)
        self._seen_calls.add((name, arguments))
        self._emit(ToolCall(index=index, id=f"call_{uuid.uuid4().hex[:24]}", name=name, arguments=arguments))
        return False


def _check(instance: Any, schema: dict[str, Any], what: str) -> None:
    """A last check behind the grammar, for schema keywords a grammar cannot express."""
    error = next(iter(validator_for(schema)(schema).iter_errors(instance)), None)
    if error is not None:
        raise EngineError(
            8001,
            400,
            f"The model's output does not satisfy {what} ({error.message}); that schema uses "
            "constraints the output grammar cannot enforce.",
        )
