"""Turns the bytes a replica generates into job events, according to the output mode.

Text is released as it is decoded (held back only while it might be the start of a stop
sequence). Tool calls are released one whole call at a time, after their arguments have
been checked against the tool's schema, so a client never sees arguments that do not
validate, not even in a stream cut short by `max_tokens`. A call identical to an earlier
one in the same answer ends the list: it would only repeat work, and small models fall
into exactly that loop.

A JSON answer (`response_format`) keeps room to close: before each token is taken, `fits`
asks whether the text that would close the answer after it (`json_closer`) still fits in
`max_tokens`; when it would not, generation ends there and `finish` appends that closing, so
an answer cut short by `max_tokens` still parses (and says it was closed: `closed_early`).
A schema whose smallest answer does not fit at all is refused before anything is generated.
"""

from __future__ import annotations

import codecs
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

from jsonschema.validators import validator_for

from playground.engine.answer_parsing import StopMatcher, ToolCallParser
from playground.engine.errors import EngineError, invalid_input
from playground.engine.json_closer import JsonCloser, JsonStateError
from playground.engine.protocol import ClosedEarly, Event, GenerationSpec, TextDelta, ToolCall

logger = logging.getLogger(__name__)


class AnswerWriter:
    def __init__(
        self, spec: GenerationSpec, emit: Callable[[Event], None], count_tokens: Callable[[str], int]
    ) -> None:
        """`count_tokens`: how many of the model's tokens a text takes."""
        self.spec = spec
        self.mode = spec.mode  # "auto" becomes "text" or "tools" once the first text is known
        self._emit = emit
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stops = StopMatcher(spec.stop)
        self._calls = ToolCallParser()
        self._seen_calls: set[tuple[str, str]] = set()
        self._json_parts: list[str] = []
        self._count_tokens = count_tokens
        self._closer = JsonCloser(spec.response_schema) if spec.mode == "json" else None
        self.closed_early: ClosedEarly | None = None
        self.closing_tokens = 0  # the tokens of `closed_early.appended`, counted as completion

    def check_room(self) -> None:
        """Refuse a JSON answer whose smallest form under its schema cannot fit in `max_tokens`."""
        if self._closer is None:
            return
        smallest = self._closer.closing()
        needed = self._count_tokens(smallest)
        if needed > self.spec.max_tokens:
            raise invalid_input(
                f"`max_tokens` is {self.spec.max_tokens}, but the smallest answer the response_format "
                f"schema allows, {smallest}, takes {needed} tokens; send max_tokens of at least {needed}."
            )

    def fits(self, piece: bytes, used: int) -> bool:
        """Whether the answer, taking this token (`used` tokens with it), could still be closed
        within `max_tokens`. Always true outside JSON mode."""
        if self._closer is None:
            return True
        state = self._decoder.getstate()
        text = self._decoder.decode(piece)
        self._decoder.setstate(state)
        trial = self._closer.copy()
        try:
            trial.feed(text)
        except JsonStateError:
            self._lose_track()
            return True
        return used + self._count_tokens(trial.closing()) <= self.spec.max_tokens

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
        elif reason == "length" and self._closer is not None and not self._closer.done:
            self._close()
        return reason

    def _close(self) -> None:
        assert self._closer is not None and self.spec.response_schema is not None
        appended = self._closer.closing()
        self._emit(TextDelta(appended))
        self.closing_tokens = self._count_tokens(appended)
        try:
            closed = json.loads("".join(self._json_parts) + appended)
        except ValueError as exc:  # a closer bug: say so rather than claim a valid answer
            logger.error("a closed JSON answer does not parse: %s", exc)
            error: str | None = f"the closed answer does not parse ({exc})"
        else:
            error = _schema_error(closed, self.spec.response_schema)
        self.closed_early = ClosedEarly(appended=appended, schema_error=error)

    def _lose_track(self) -> None:
        """The closer could not follow the text (it should always): answer as without it."""
        logger.error("the JSON closer lost track of an answer; it will not be closed if cut short")
        self._closer = None

    def _take(self, text: str) -> bool:
        if not text:
            return False
        if self.mode == "auto":
            self.mode = "tools" if text.startswith("[") else "text"
        if self.mode == "tools":
            return any(self._emit_call(call) for call in self._calls.feed(text))
        if self.mode == "json":
            self._json_parts.append(text)
            if self._closer is not None:
                try:
                    self._closer.feed(text)
                except JsonStateError:
                    self._lose_track()
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
    error = _schema_error(instance, schema)
    if error is not None:
        raise EngineError(
            8001,
            400,
            f"The model's output does not satisfy {what} ({error}); that schema uses "
            "constraints the output grammar cannot enforce.",
        )


def _schema_error(instance: Any, schema: dict[str, Any]) -> str | None:
    error = next(iter(validator_for(schema)(schema).iter_errors(instance)), None)
    return None if error is None else error.message
