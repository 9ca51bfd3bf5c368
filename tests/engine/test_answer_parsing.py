"""Stop sequences and tool-call lists, read as the model generates them."""

from __future__ import annotations

from playground.engine.answer_parsing import StopMatcher, ToolCallParser


def test_it_releases_text_up_to_a_stop_sequence_split_over_tokens() -> None:
    matcher = StopMatcher(("END",))

    assert matcher.feed("Hello E") == ("Hello ", False)  # "E" might start "END"
    assert matcher.feed("N") == ("", False)
    assert matcher.feed("D and more") == ("", True)


def test_it_releases_held_back_text_that_turns_out_not_to_stop() -> None:
    matcher = StopMatcher(("END",))

    assert matcher.feed("EN") == ("", False)
    assert matcher.feed("ough") == ("ENough", False)
    assert matcher.feed("E") == ("", False)
    assert matcher.flush() == "E"


def test_it_stops_at_the_earliest_of_several_stop_sequences() -> None:
    assert StopMatcher(("world", "o w")).feed("hello world") == ("hell", True)


def test_it_picks_out_tool_calls_as_each_one_completes() -> None:
    parser = ToolCallParser()

    assert parser.feed('[{"name":"a","arguments":{"x":') == []
    assert parser.feed('"}{"}},{"name":"b",') == [{"name": "a", "arguments": {"x": "}{"}}]
    assert parser.feed('"arguments":{}}]') == [{"name": "b", "arguments": {}}]
