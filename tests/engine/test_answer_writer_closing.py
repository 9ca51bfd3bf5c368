"""The answer writer keeps room in `max_tokens` to close a JSON answer (one character = one token here)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from playground.engine.answer_writer import AnswerWriter
from playground.engine.errors import EngineError
from playground.engine.protocol import ClosedEarly, Event, GenerationSpec, TextDelta

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"word": {"type": "string"}, "count": {"type": "integer", "minimum": 5}},
    "required": ["word", "count"],
}


def writer(max_tokens: int, events: list[Event]) -> AnswerWriter:
    spec = GenerationSpec(messages=[], max_tokens=max_tokens, mode="json", response_schema=SCHEMA)
    return AnswerWriter(spec, events.append, count_tokens=len)


def generate(answer: AnswerWriter, pieces: list[str]) -> int:
    """Feed pieces while they fit, as the generator does; the number taken."""
    taken = 0
    for piece in pieces:
        if not answer.fits(piece.encode(), taken + 1):
            break
        taken += 1
        answer.feed(piece.encode())
    return taken


def test_it_stops_while_the_closing_still_fits_and_appends_it() -> None:
    events: list[Event] = []
    answer = writer(24, events)

    taken = generate(answer, list('{"word":"elephants","count":12}'))
    reason = answer.finish("length")
    text = "".join(event.text for event in events if isinstance(event, TextDelta))

    assert json.loads(text) == {"word": "ele", "count": 5}
    assert taken + answer.closing_tokens == 24
    assert answer.closed_early == ClosedEarly(appended='","count":5}', schema_error=None)
    assert reason == "length"


def test_a_cut_number_is_kept_and_its_schema_error_told() -> None:
    events: list[Event] = []
    answer = writer(30, events)

    generate(answer, ['{"word":"ox","count":', "1"])
    answer.finish("length")

    assert answer.closed_early is not None and answer.closed_early.appended == "}"
    assert answer.closed_early.schema_error == "1 is less than the minimum of 5"


def test_a_complete_answer_is_not_closed() -> None:
    events: list[Event] = []
    answer = writer(40, events)

    generate(answer, ['{"word":"ox","count":7}'])

    assert answer.finish("stop") == "stop" and answer.closed_early is None and answer.closing_tokens == 0


def test_max_tokens_below_the_smallest_answer_is_refused_naming_it() -> None:
    with pytest.raises(EngineError) as refused:
        writer(10, []).check_room()

    assert refused.value.status == 400
    assert '{"word":"","count":5}, takes 21 tokens; send max_tokens of at least 21' in refused.value.message
    writer(21, []).check_room()  # exactly enough is accepted
