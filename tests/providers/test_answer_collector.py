"""Tool calls put together from the pieces a stream splits them into, keyed by index."""

from __future__ import annotations

from playground.providers.adapters.assembly import EventAssembler
from playground.providers.answer_collector import AnswerCollector
from playground.providers.events import Finish, StreamEvent, ToolCallDelta
from tests.fakes.upstream import openai_chunk, usage, usage_chunk


def collected(events: list[StreamEvent]) -> AnswerCollector:
    answer = AnswerCollector()
    for event in events:
        answer.observe(event)
    return answer


def test_arguments_split_across_deltas_are_joined_in_order_under_the_first_pieces_id_and_name() -> None:
    answer = collected(
        [
            ToolCallDelta(index=0, id="call_a", name="get_weather", arguments=""),
            ToolCallDelta(index=0, id=None, name=None, arguments='{"ci'),
            ToolCallDelta(index=0, id=None, name=None, arguments='ty": "Pa'),
            ToolCallDelta(index=0, id=None, name=None, arguments='ris"}'),
            ToolCallDelta(index=0, id=None, name=None, arguments=""),  # a closing delta
        ]
    )
    [call] = answer.tool_calls
    assert (call.index, call.id, call.name) == (0, "call_a", "get_weather")
    assert call.arguments == '{"city": "Paris"}'
    assert call.parsed_arguments() == ({"city": "Paris"}, "")


def test_interleaved_parallel_calls_with_kimis_repeated_ids_stay_apart_by_index() -> None:
    same_id = "functions.get_weather:0"  # Kimi repeats ids within one reply
    answer = collected(
        [
            ToolCallDelta(index=1, id=same_id, name="get_weather", arguments='{"city":'),
            ToolCallDelta(index=0, id=same_id, name="get_weather", arguments='{"city":'),
            ToolCallDelta(index=1, id=None, name=None, arguments=' "Oslo"}'),
            ToolCallDelta(index=0, id=None, name=None, arguments=' "Paris"}'),
        ]
    )
    assert [(call.index, call.id, call.arguments) for call in answer.tool_calls] == [
        (0, same_id, '{"city": "Paris"}'),
        (1, same_id, '{"city": "Oslo"}'),
    ]


def test_a_piece_without_a_name_for_an_unknown_index_makes_no_call() -> None:
    answer = collected([ToolCallDelta(index=3, id=None, name=None, arguments="")])
    assert answer.tool_calls == []


def test_arguments_that_are_not_json_say_why() -> None:
    [call] = collected([ToolCallDelta(index=0, id="c", name="f", arguments='{"a": ')]).tool_calls
    value, why = call.parsed_arguments()
    assert value is None and why.startswith("The arguments are not valid JSON")


def test_openai_chunks_from_the_wire_become_the_same_calls_and_finish_with_tool_calls() -> None:
    assembler = EventAssembler()
    chunks = [
        openai_chunk(tool_calls=[{"index": 0, "id": "c0", "function": {"name": "f", "arguments": "{"}}]),
        openai_chunk(tool_calls=[{"index": 1, "id": "c1", "function": {"name": "g", "arguments": '{"x"'}}]),
        openai_chunk(tool_calls=[{"index": 0, "function": {"arguments": "}"}}]),
        openai_chunk(tool_calls=[{"index": 1, "id": None, "function": {"name": None, "arguments": ": 1}"}}]),
        usage_chunk(usage(10, 5)),
    ]
    events: list[StreamEvent] = [event for chunk in chunks for event in assembler.feed(chunk)]
    events += assembler.finish(complete=True)
    answer = collected(events)
    assert [(call.id, call.name, call.arguments) for call in answer.tool_calls] == [
        ("c0", "f", "{}"),
        ("c1", "g", '{"x": 1}'),
    ]
    assert isinstance(events[-1], Finish) and events[-1].reason == "tool_calls"
    assert [call.as_message_part() for call in answer.tool_calls][1] == {
        "id": "c1",
        "type": "function",
        "function": {"name": "g", "arguments": '{"x": 1}'},
    }
