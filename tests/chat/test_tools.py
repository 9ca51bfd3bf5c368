"""Tools: definitions checked with their paths, the capability gate, Continue, and history."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.urls import reverse

from playground.chat.domain.tools import (
    ToolsInvalid,
    tool_call_record,
    tools_parse,
    tools_token_estimate,
    tools_upstream,
)
from playground.chat.models import Conversation, Message, MessageRole
from playground.chat.services.conversations import conversation_create, conversation_tools_update
from playground.chat.services.history import upstream_messages
from playground.chat.services.tool_continuations import (
    ToolResultInput,
    ToolResultsRefused,
    chat_auto_continue,
    chat_continue_start,
)
from playground.chat.services.turns import chat_turn_start
from playground.providers.answer_collector import ToolCall
from playground.providers.models import ProviderConnection
from playground.usage.metering import estimate_tokens
from tests.fakes.upstream import FakeUpstream, openai_chunk, sse, usage, usage_chunk
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.messages import message_append
from tests.support.sockets import FINISHED, Socket

VISION_ONLY = "@cf/google/gemma-4-26b-a4b-it"  # the catalogue says: no tools
REPEATED_ID = "functions.get_weather:0"  # Kimi repeats ids within one reply and across turns


def weather_tool(**extra: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
        **extra,
    }


def save_tools(actors: Actors, conversation: Conversation, tools: list[Any], *, choice: str) -> None:
    conversation_tools_update(
        user=actors.owner,
        conversation_id=conversation.pk,
        tools_text=json.dumps(tools),
        tool_choice=choice,
        parallel_tool_calls=True,
        auto_mock_steps=0,
    )


def problems_of(value: Any) -> list[tuple[str, str]]:
    with pytest.raises(ToolsInvalid) as caught:
        tools_parse(value if isinstance(value, str) else json.dumps(value))
    return [(problem.path, problem.message) for problem in caught.value.problems]


# --- definitions ---------------------------------------------------------------------------


def test_a_valid_definition_is_kept_as_typed_and_sent_without_our_own_keys() -> None:
    tool = weather_tool(mocks=[{"temp": 18}], returns_json=True)
    assert tools_parse(json.dumps([tool])) == [tool]
    assert tools_upstream([tool]) == [weather_tool()]


@pytest.mark.parametrize(
    ("value", "path", "words"),
    [
        ("[{", "$", "Not valid JSON"),
        ('[{"type": "function", "function": {"name": "f", "parameters": NaN}}]', "$", "Not valid JSON"),
        ({"type": "function"}, "$", "JSON array"),
        ([5], "$[0]", "must be an object"),
        ([{**weather_tool(), "extra": 1}], "$[0].extra", "Unknown key 'extra'"),
        ([{**weather_tool(), "type": "custom"}], "$[0].type", 'Must be "function"'),
        ([{"type": "function"}], "$[0].function", "Required"),
        (
            [{"type": "function", "function": {"name": "f", "paramters": {}}}],
            "$[0].function.paramters",
            "Unknown",
        ),
        (
            [{"type": "function", "function": {"name": "get weather"}}],
            "$[0].function.name",
            "letters, digits",
        ),
        ([weather_tool(), weather_tool()], "$[1].function.name", "already named"),
        (
            [{"type": "function", "function": {"name": "f", "description": False}}],
            "$[0].function.description",
            "string",
        ),
        (
            [{"type": "function", "function": {"name": "f", "strict": "yes"}}],
            "$[0].function.strict",
            "true, false",
        ),
        (
            [{"type": "function", "function": {"name": "f", "parameters": []}}],
            "$[0].function.parameters",
            "Schema object",
        ),
        (
            [
                {
                    "type": "function",
                    "function": {"name": "f", "parameters": {"properties": {"a": {"type": "strin"}}}},
                }
            ],
            "$[0].function.parameters.properties.a.type",
            "JSON Schema 2020-12",
        ),
        (
            [{"type": "function", "function": {"name": "f", "parameters": {"required": "a"}}}],
            "$[0].function.parameters.required",
            "JSON Schema 2020-12",
        ),
        (
            [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}],
            "$[0].function.parameters.type",
            "object",
        ),
        ([weather_tool(returns_json="yes")], "$[0].returns_json", "true or false"),
        ([weather_tool(mocks={"a": 1})], "$[0].mocks", "array"),
        ([weather_tool(returns_json=True, mocks=[{"ok": 1}, "sunny"])], "$[0].mocks[1]", "not JSON"),
    ],
)
def test_each_kind_of_bad_definition_is_named_at_its_path(value: Any, path: str, words: str) -> None:
    problems = problems_of(value)
    assert any(where == path and words in message for where, message in problems), problems


def test_every_problem_is_reported_not_only_the_first() -> None:
    problems = problems_of([{"type": "x", "function": {"name": ""}}, 5])
    assert [path for path, _ in problems] == ["$[0].type", "$[0].function.name", "$[1]"]


@pytest.mark.django_db
def test_nothing_is_saved_when_any_part_is_invalid(actors: Actors, conversation: Conversation) -> None:
    conversation_tools_update(
        user=actors.owner,
        conversation_id=conversation.pk,
        tools_text=json.dumps([weather_tool()]),
        tool_choice="get_weather",
        parallel_tool_calls=False,
        auto_mock_steps=2,
    )
    with pytest.raises(ToolsInvalid) as caught:
        conversation_tools_update(
            user=actors.owner,
            conversation_id=conversation.pk,
            tools_text=json.dumps(
                [weather_tool(), {"type": "function", "function": {"name": "f", "parameters": 1}}]
            ),
            tool_choice="nope",
            parallel_tool_calls=True,
            auto_mock_steps=0,
        )
    assert [problem.path for problem in caught.value.problems] == ["$[1].function.parameters"]
    conversation.refresh_from_db()
    assert conversation.tools == [weather_tool()]
    assert conversation.tool_choice == {"type": "function", "function": {"name": "get_weather"}}
    assert (conversation.parallel_tool_calls, conversation.auto_mock_steps) == (False, 2)


@pytest.mark.django_db
def test_a_named_tool_choice_must_name_a_defined_tool(actors: Actors, conversation: Conversation) -> None:
    with pytest.raises(ToolsInvalid) as caught:
        save_tools(actors, conversation, [weather_tool()], choice="get_time")
    assert caught.value.problems[0].path == "tool_choice"


def test_the_token_estimate_counts_what_is_sent_by_the_meters_rule() -> None:
    tool = weather_tool(mocks=["x" * 4000])  # mocks are never sent: they add nothing
    assert tools_token_estimate([tool]) == estimate_tokens(len(json.dumps([weather_tool()])))
    assert tools_token_estimate([]) == 0


def test_a_calls_arguments_are_checked_against_its_tools_schema_with_paths() -> None:
    tools = [weather_tool()]
    good = tool_call_record(
        ToolCall(index=0, id="a", name="get_weather", arguments='{"city": "Oslo"}'), tools
    )
    assert good["valid"] is True and good["errors"] == []
    wrong = tool_call_record(ToolCall(index=1, id="", name="get_weather", arguments='{"city": 5}'), tools)
    assert wrong["valid"] is False and wrong["errors"][0]["path"] == "$.city"
    assert wrong["id"] == "call_1"  # a call must be named by its result: made from the index
    broken = tool_call_record(ToolCall(index=0, id="a", name="get_weather", arguments='{"city"'), tools)
    assert "not valid JSON" in broken["errors"][0]["message"]
    unknown = tool_call_record(ToolCall(index=0, id="a", name="rm_rf", arguments="{}"), tools)
    assert "not a defined tool" in unknown["errors"][0]["message"]


# --- the capability gate -----------------------------------------------------------------------


@pytest.fixture
def no_tools_conversation(actors: Actors, workers_connection: ProviderConnection) -> Conversation:
    return conversation_create(user=actors.owner, connection_id=workers_connection.pk, model_id=VISION_ONLY)


@pytest.mark.django_db
def test_tools_are_refused_for_a_model_the_catalogue_says_takes_none(
    actors: Actors, no_tools_conversation: Conversation
) -> None:
    with pytest.raises(ToolsInvalid) as caught:
        save_tools(actors, no_tools_conversation, [weather_tool()], choice="auto")
    assert "does not support tool calling" in caught.value.problems[0].message


@pytest.mark.django_db
def test_the_server_never_sends_stored_tools_to_a_model_that_takes_none(
    actors: Actors, no_tools_conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    Conversation.objects.filter(pk=no_tools_conversation.pk).update(tools=[weather_tool()])  # stored earlier
    with pytest.raises(ValidationError, match="does not support tool calling"):
        chat_turn_start(user=actors.owner, conversation_id=no_tools_conversation.pk, text="Weather?")
    assert not Message.objects.filter(conversation=no_tools_conversation).exists()
    assert fake_upstream.requests == []


@pytest.mark.django_db
def test_the_page_disables_the_editor_with_the_reason(
    actors: Actors, no_tools_conversation: Conversation
) -> None:
    client = client_for(actors.owner)
    page = client.get(reverse("chat:conversation-detail", args=[no_tools_conversation.pk])).text
    assert (
        "Gemma 4 26B A4B does not support tool calling (per the catalogue). Tools are not sent to it." in page
    )
    assert 'name="tools" rows="14" data-json-editor' in page and "disabled>" in page
    assert 'id="tools-save"' not in page


# --- the tools view ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_view_shows_each_problem_inline_and_an_outsider_gets_a_404(
    actors: Actors, conversation: Conversation
) -> None:
    url = reverse("chat:conversation-tools", args=[conversation.pk])
    client = client_for(actors.owner)
    bad = json.dumps([{"type": "function", "function": {"name": "f", "parameters": {"type": 5}}}])
    response = client.post(url, {"tools": bad, "tool_choice": "auto"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "$[0].function.parameters.type" in response.text and "Nothing was saved" in response.text
    response = client.post(url, {"tools": bad, "tool_choice": "auto"})  # no JavaScript
    assert response.status_code == 400 and "$[0].function.parameters.type" in response.text
    good = json.dumps([weather_tool()])
    response = client.post(url, {"tools": good, "tool_choice": "required", "parallel_tool_calls": "on"})
    assert response.status_code == 302
    conversation.refresh_from_db()
    assert conversation.tools == [weather_tool()] and conversation.tool_choice == "required"
    outsider = client_for(actors.outsider)
    assert outsider.post(url, {"tools": "[]"}).status_code == 404


# --- Continue and history ----------------------------------------------------------------------


def answer_with_calls(conversation: Conversation, *calls: tuple[int, str, str]) -> Message:
    message_append(conversation=conversation, role=MessageRole.USER, content="Weather?")
    return message_append(
        conversation=conversation,
        role=MessageRole.ASSISTANT,
        tool_calls=[
            {
                "index": index,
                "id": call_id,
                "name": "get_weather",
                "arguments": args,
                "valid": True,
                "errors": [],
            }
            for index, call_id, args in calls
        ],
    )


@pytest.fixture
def tools_conversation(conversation: Conversation) -> Conversation:
    conversation.tools = [weather_tool(returns_json=True, mocks=[{"temp": 18}])]
    conversation.save()
    return conversation


@pytest.mark.django_db
def test_continue_refuses_parallel_calls_with_a_result_missing_and_saves_nothing(
    actors: Actors, tools_conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    answer = answer_with_calls(
        tools_conversation, (0, REPEATED_ID, '{"city": "Paris"}'), (1, REPEATED_ID, '{"city": "Oslo"}')
    )
    with pytest.raises(ToolResultsRefused) as caught:
        chat_continue_start(
            user=actors.owner,
            conversation_id=tools_conversation.pk,
            message_id=answer.pk,
            results={0: ToolResultInput(text='{"temp": 18}')},
        )
    assert list(caught.value.errors) == [1]
    assert "Type a result or pick a mock" in caught.value.errors[1]
    assert not Message.objects.filter(role=MessageRole.TOOL).exists()
    assert fake_upstream.requests == []


@pytest.mark.django_db
def test_continue_refuses_text_where_the_tool_returns_json(
    actors: Actors, tools_conversation: Conversation
) -> None:
    answer = answer_with_calls(tools_conversation, (0, "c0", '{"city": "Paris"}'))
    with pytest.raises(ToolResultsRefused) as caught:
        chat_continue_start(
            user=actors.owner,
            conversation_id=tools_conversation.pk,
            message_id=answer.pk,
            results={0: ToolResultInput(text="sunny")},
        )
    assert "not valid JSON" in caught.value.errors[0]
    assert not Message.objects.filter(role=MessageRole.TOOL).exists()


@pytest.mark.django_db
def test_continue_refuses_answered_calls_and_an_answer_that_is_not_the_latest(
    actors: Actors, tools_conversation: Conversation
) -> None:
    answer = answer_with_calls(tools_conversation, (0, "c0", '{"city": "Paris"}'))
    chat_continue_start(
        user=actors.owner,
        conversation_id=tools_conversation.pk,
        message_id=answer.pk,
        results={0: ToolResultInput(mock=0)},
    )
    with pytest.raises(ValidationError, match="already answered"):
        chat_continue_start(
            user=actors.owner,
            conversation_id=tools_conversation.pk,
            message_id=answer.pk,
            results={0: ToolResultInput(mock=0)},
        )
    older = answer_with_calls(tools_conversation, (0, "c1", "{}"))
    message_append(conversation=tools_conversation, role=MessageRole.USER, content="Never mind")
    with pytest.raises(ValidationError, match="later messages exist"):
        chat_continue_start(
            user=actors.owner,
            conversation_id=tools_conversation.pk,
            message_id=older.pk,
            results={0: ToolResultInput(text="{}")},
        )


@pytest.mark.django_db
def test_history_sends_the_calls_then_their_results_in_index_order_despite_repeated_ids(
    tools_conversation: Conversation,
) -> None:
    answer = answer_with_calls(
        tools_conversation, (0, REPEATED_ID, '{"city": "Paris"}'), (1, REPEATED_ID, '{"city": "Oslo"}')
    )
    for index, content in ((1, "oslo result"), (0, "paris result")):  # saved out of order
        message_append(
            conversation=tools_conversation,
            role=MessageRole.TOOL,
            content=content,
            reply_to=answer,
            tool_call_index=index,
            tool_call_id=REPEATED_ID,
        )
    message_append(conversation=tools_conversation, role=MessageRole.ASSISTANT, content="Sunny both.")
    messages = upstream_messages(tools_conversation)
    assert messages[1:] == [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": REPEATED_ID,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": args},
                }
                for args in ('{"city": "Paris"}', '{"city": "Oslo"}')
            ],
        },
        {"role": "tool", "tool_call_id": REPEATED_ID, "content": "paris result"},
        {"role": "tool", "tool_call_id": REPEATED_ID, "content": "oslo result"},
        {"role": "assistant", "content": "Sunny both."},
    ]


@pytest.mark.django_db
def test_calls_left_unanswered_are_not_sent_as_dangling_tool_calls(tools_conversation: Conversation) -> None:
    answer_with_calls(tools_conversation, (0, "c0", "{}"))
    message_append(conversation=tools_conversation, role=MessageRole.USER, content="Skip that.")
    message_append(conversation=tools_conversation, role=MessageRole.ASSISTANT, content="Skipped.")
    # The question answered only by calls nobody answered is left out with them: no two user
    # messages in a row.
    assert upstream_messages(tools_conversation)[1:] == [
        {"role": "user", "content": "Skip that."},
        {"role": "assistant", "content": "Skipped."},
    ]


# --- over the socket ---------------------------------------------------------------------------


def call_frames(call_id: str, city: str) -> list[dict[str, Any]]:
    head = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    return [
        openai_chunk(tool_calls=[head]),
        openai_chunk(tool_calls=[{"index": 0, "function": {"arguments": json.dumps({"city": city})}}]),
        openai_chunk(finish_reason="tool_calls"),
        usage_chunk(usage(50, 10)),
    ]


@pytest.fixture
def auto_mock_conversation(tools_conversation: Conversation) -> Conversation:
    tools_conversation.auto_mock_steps = 3
    tools_conversation.save()
    return tools_conversation


@pytest.mark.django_db(transaction=True)
async def test_auto_mock_answers_a_loop_of_calls_for_n_steps_then_the_model_answers(
    open_socket: Callable[[str | None, int], Socket],
    fake_upstream: FakeUpstream,
    auto_mock_conversation: Conversation,
) -> None:
    conversation = auto_mock_conversation
    fake_upstream.script(
        sse(call_frames(REPEATED_ID, "Paris")),
        sse(call_frames(REPEATED_ID, "Oslo")),  # the same id again, next turn: Kimi does this
    )
    socket = open_socket("owner", conversation.pk)
    await socket.connect()
    await socket.send(action="send", message="Weather in Paris, then Oslo?")
    frames: list[str] = []
    while len([frame for frame in frames if FINISHED in frame]) < 3:
        frames += await socket.receive_until(FINISHED)
    await socket.disconnect()
    assert "Hello from the fake upstream." in frames[-1]
    assert len(fake_upstream.requests) == 3
    last = fake_upstream.requests[2].json["messages"]
    assert [message["role"] for message in last[-4:]] == ["assistant", "tool", "assistant", "tool"]
    assert [message.get("tool_call_id") for message in last[-4:]] == [None, REPEATED_ID, None, REPEATED_ID]
    assert last[-1]["content"] == json.dumps({"temp": 18})


# --- auto-mock mode: the turn service's rule ---------------------------------------------------
# Async and transactional like the consumer that calls it: the service reaches the database
# from a worker thread (`database_sync_to_async`).
achat_turn_start = sync_to_async(chat_turn_start)
aanswer_with_calls = sync_to_async(answer_with_calls)


@pytest.mark.django_db(transaction=True)
async def test_auto_mock_continues_with_the_first_mocks_counting_steps_and_stops_after_n(
    actors: Actors, auto_mock_conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    conversation = auto_mock_conversation  # auto_mock_steps = 3
    turn = await achat_turn_start(user=actors.owner, conversation_id=conversation.pk, text="Weather?")
    for step in (1, 2, 3):
        answer = await aanswer_with_calls(conversation, (0, REPEATED_ID, '{"city": "Paris"}'))
        turn.assistant_message = answer
        next_turn = await chat_auto_continue(user=actors.owner, turn=turn)
        assert next_turn is not None
        assert (next_turn.mock_steps, next_turn.continues) == (step, answer)
        assert [result.content for result in next_turn.tool_results] == [json.dumps({"temp": 18})]
        turn = next_turn
    turn.assistant_message = await aanswer_with_calls(conversation, (0, "c9", '{"city": "Oslo"}'))
    assert await chat_auto_continue(user=actors.owner, turn=turn) is None  # the user answers the 4th
    assert await Message.objects.filter(role=MessageRole.TOOL).acount() == 3
    assert fake_upstream.requests == []  # the service builds turns; the consumer streams them


@pytest.mark.django_db(transaction=True)
async def test_auto_mock_stops_when_a_call_has_no_mock_or_there_is_no_call(
    actors: Actors, auto_mock_conversation: Conversation
) -> None:
    conversation = auto_mock_conversation
    turn = await achat_turn_start(user=actors.owner, conversation_id=conversation.pk, text="Weather?")
    turn.assistant_message = await Message.objects.acreate(
        conversation=conversation, role=MessageRole.ASSISTANT, content="No calls."
    )
    assert await chat_auto_continue(user=actors.owner, turn=turn) is None
    conversation.tools = [weather_tool(returns_json=True)]  # no mocks
    await conversation.asave()
    turn.assistant_message = await aanswer_with_calls(conversation, (0, "c0", '{"city": "Paris"}'))
    assert await chat_auto_continue(user=actors.owner, turn=turn) is None
    assert not await Message.objects.filter(role=MessageRole.TOOL).aexists()


@pytest.mark.django_db(transaction=True)
async def test_auto_mock_is_off_at_zero_steps(actors: Actors, tools_conversation: Conversation) -> None:
    turn = await achat_turn_start(user=actors.owner, conversation_id=tools_conversation.pk, text="Weather?")
    turn.assistant_message = await aanswer_with_calls(tools_conversation, (0, "c0", "{}"))
    assert await chat_auto_continue(user=actors.owner, turn=turn) is None
    assert not await Message.objects.filter(role=MessageRole.TOOL).aexists()
