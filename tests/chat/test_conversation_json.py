"""A conversation exported as JSON (the OpenAI request its next turn sends, our settings under
one key) and imported back as a new conversation: each accepted form, each refusal with its
JSON path, and the round trip checked at the loopback upstream."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from playground.catalog.seed import KIMI_K26
from playground.chat.domain import conversation_json as document
from playground.chat.domain.conversation_json import ConversationJsonInvalid, document_text
from playground.chat.models import Attachment, Conversation, MessageRole
from playground.chat.services.conversation_json import (
    ImportTarget,
    ImportTargetRefused,
    conversation_export,
    conversation_import,
)
from playground.chat.services.conversations import ConversationNotFound
from playground.chat.services.turns import chat_turn_start
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.services import connection_save
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.connections import WORKERS_TOKEN
from tests.support.images import png
from tests.support.messages import WEATHER_CALL, WEATHER_TOOL, message_append, picture_and_weather_append

pytestmark = pytest.mark.django_db

LLAMA = "@cf/meta/llama-3.3-70b-instruct-fp8-fast"  # text only, no reasoning
GEMMA = "@cf/google/gemma-4-26b-a4b-it"  # reads images, takes no tools
WEATHER, CALL = WEATHER_TOOL, WEATHER_CALL
VARIABLES = [{"name": "city", "type": "text", "value": "Oslo"}]


@pytest.fixture
def rich(conversation: Conversation) -> Conversation:
    """The owner's conversation on Kimi: a system prompt, an image, a tool round trip, a failed
    turn at the end, tools with mocks, parameters and variables."""
    Conversation.objects.filter(pk=conversation.pk).update(
        title="Weather and pictures",
        tools=[WEATHER],
        tool_choice="auto",
        parallel_tool_calls=False,
        auto_mock_steps=2,
        parameters={"temperature": 0.3, "max_tokens": 300, "thinking": False},
        variables=VARIABLES,
    )
    conversation.refresh_from_db()
    picture_and_weather_append(conversation, question="Weather in {{city}}?")
    message_append(conversation=conversation, role=MessageRole.USER, content="This one failed")
    message_append(conversation=conversation, role=MessageRole.ASSISTANT, content="")  # a failed answer
    return conversation


def exported(actors: Actors, conversation: Conversation) -> dict[str, Any]:
    return conversation_export(user=actors.owner, conversation_id=conversation.pk)


def imported(actors: Actors, data: Any, **target: Any) -> Conversation:
    text = data if isinstance(data, str) else json.dumps(data)
    return conversation_import(
        user=actors.teammate, text=text, target=ImportTarget(**{"team_id": actors.team.pk, **target})
    )


def problems(actors: Actors, data: Any, **target: Any) -> list[tuple[str, str]]:
    """The refusal's (path, message) pairs; nothing was written."""
    before = (Conversation.objects.count(), Attachment.objects.count())
    with pytest.raises(ConversationJsonInvalid) as refused:
        imported(actors, data, **target)
    assert (Conversation.objects.count(), Attachment.objects.count()) == before
    return [(problem.path, problem.message) for problem in refused.value.problems]


def paths(actors: Actors, data: Any, **target: Any) -> list[str]:
    return [path for path, _ in problems(actors, data, **target)]


def body(*messages: Any, **fields: Any) -> dict[str, Any]:
    return {"model": KIMI_K26, "messages": list(messages), **fields}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def image_url(data: bytes, content_type: str = "image/png") -> dict[str, Any]:
    encoded = base64.b64encode(data).decode()
    return {"type": "image_url", "image_url": {"url": f"data:{content_type};base64,{encoded}"}}


# --- export ----------------------------------------------------------------------------------


def test_the_export_is_the_request_the_next_turn_sends_with_our_settings_under_one_key(
    actors: Actors, rich: Conversation
) -> None:
    data = exported(actors, rich)
    stored = Attachment.objects.get(conversation=rich).file.read()
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
    }
    assert data["model"] == KIMI_K26
    assert data["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "What is in this picture?"}, image_url(stored)],
        },
        {"role": "assistant", "content": "A red rectangle."},
        {"role": "user", "content": "Weather in {{city}}?"},  # placeholders kept: the values travel apart
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 °C"},
        {"role": "assistant", "content": "Sunny in Oslo."},
        # the failed turn is left out, as the history leaves it out
    ]
    assert data["tools"] == [{key: WEATHER[key] for key in ("type", "function")}]  # no mocks
    assert (data["tool_choice"], data["parallel_tool_calls"]) == ("auto", False)
    assert (data["temperature"], data["max_tokens"]) == (0.3, 300)
    assert data["chat_template_kwargs"] == {"thinking": False}  # as Kimi K2.6 reads the switch
    assert "response_format" not in data  # text
    ours = data.pop("playground")
    assert ours.pop("exported_at")
    assert ours == {
        "format": "playground-conversation",
        "version": 1,
        "title": "Weather and pictures",
        "connection": {"name": "Workers AI (fake)", "kind": "workers-ai"},
        "use_affinity": True,
        "tool_mocks": {"weather": {"mocks": ["Sunny, 21 °C"], "returns_json": False}},
        "auto_mock_steps": 2,
        "variables": VARIABLES,
    }
    assert set(data) <= set(document.REQUEST_KEYS)


def test_no_secret_is_exported(actors: Actors, rich: Conversation) -> None:
    text = document_text(exported(actors, rich))
    assert WORKERS_TOKEN not in text
    assert rich.affinity_key not in text
    assert "usage" not in text


def test_a_viewer_exports_and_an_outsider_finds_nothing(actors: Actors, rich: Conversation) -> None:
    assert conversation_export(user=actors.viewer, conversation_id=rich.pk)["model"] == KIMI_K26
    with pytest.raises(ConversationNotFound):
        conversation_export(user=actors.outsider, conversation_id=rich.pk)


def test_a_parameter_the_model_does_not_take_is_not_exported(actors: Actors, rich: Conversation) -> None:
    Conversation.objects.filter(pk=rich.pk).update(model_id=LLAMA)  # no thinking switch
    assert "chat_template_kwargs" not in exported(actors, rich)


# --- the round trip ----------------------------------------------------------------------------


def test_an_exported_conversation_imported_sends_the_same_next_request(
    actors: Actors, rich: Conversation, fake_upstream: FakeUpstream
) -> None:
    copy_ = imported(actors, exported(actors, rich))
    for conversation in (rich, copy_):
        turn = chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text="And tomorrow?")
        async_to_sync(_drain)(turn)
    original, again = (request.json for request in fake_upstream.requests[-2:])
    assert again == original
    assert [m["role"] for m in again["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert copy_.connection_id == rich.connection_id and copy_.team_id == rich.team_id
    assert copy_.user == actors.teammate and copy_.affinity_key != rich.affinity_key
    assert (copy_.tools, copy_.auto_mock_steps, copy_.parallel_tool_calls) == ([WEATHER], 2, False)
    assert copy_.parameters == rich.parameters and copy_.variables == VARIABLES
    assert copy_.title == "Weather and pictures"


async def _drain(turn: Any) -> None:
    async for _ in turn.events():
        pass


def test_imported_answers_are_written_and_keep_their_calls_and_images(
    actors: Actors, rich: Conversation
) -> None:
    copy_ = imported(actors, exported(actors, rich))
    messages = list(copy_.messages.order_by("id"))
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert [m.written for m in messages if m.role == MessageRole.ASSISTANT] == [True, True, True]
    assert all(m.usage_record_id is None for m in messages)
    assert [m.parent_id for m in messages] == [None, *(m.pk for m in messages[:-1])]  # one branch
    assert copy_.current_leaf_id == messages[-1].pk
    answer, result = messages[3], messages[4]
    assert answer.tool_calls == [CALL]  # checked again against the tool: valid
    assert (result.reply_to_id, result.tool_call_index, result.tool_call_id) == (answer.pk, 0, "call_1")
    original = Attachment.objects.get(conversation=rich)
    image = Attachment.objects.get(conversation=copy_)
    assert image.message_id == messages[0].pk
    assert (image.sha256, image.width, image.height) == (original.sha256, original.width, original.height)
    assert image.file.name != original.file.name  # a file of its own


# --- accepted forms ----------------------------------------------------------------------------


def test_a_bare_openai_request_body_is_imported(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    conversation = imported(
        actors,
        body(
            {"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
            user("Hello"),
            {"role": "assistant", "content": [{"type": "text", "text": "Bonjour"}]},
            user("How are you?"),
            temperature=0.5,
            max_completion_tokens=64,
            stop="END",
            stream=True,
            response_format={"type": "json_object"},
        ),
    )
    assert conversation.connection_id == workers_connection.pk  # no connection named: the team's default
    assert conversation.system_prompt == "Answer in French."
    assert conversation.parameters == {"temperature": 0.5, "max_tokens": 64, "stop": ["END"]}
    assert conversation.response_format == {"type": "json_object"}
    assert conversation.title == "Hello"
    messages = list(conversation.messages.order_by("id"))
    assert [(m.role, m.content, m.written) for m in messages] == [
        ("user", "Hello", False),
        ("assistant", "Bonjour", True),
        ("user", "How are you?", True),  # no answer follows it: it goes out as the document had it
    ]


def test_a_bare_list_of_messages_takes_the_model_chosen(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    conversation = imported(
        actors, [user("Hi"), {"role": "assistant", "content": "Hello!"}], model_id=KIMI_K26
    )
    assert conversation.model_id == KIMI_K26
    assert list(conversation.messages.values_list("content", flat=True)) == ["Hi", "Hello!"]


def test_a_document_that_names_no_model_asks_for_one(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    with pytest.raises(ImportTargetRefused) as refused:
        imported(actors, [user("Hi")])
    assert refused.value.message_dict == {"model_id": ["The document names no model: choose one."]}
    assert refused.value.connection == workers_connection


def test_an_answer_waiting_for_its_tool_results_can_end_the_document(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    conversation = imported(
        actors,
        body(
            user("Weather?"),
            {"role": "assistant", "content": None, "tool_calls": [call]},
            tools=[WEATHER_SENT],
        ),
    )
    answer = conversation.messages.get(role=MessageRole.ASSISTANT)
    assert answer.tool_calls[0]["valid"] is False  # "city" is required: checked as a model's call is
    assert conversation.current_leaf_id == answer.pk  # the page offers to answer its call


WEATHER_SENT = {key: WEATHER[key] for key in ("type", "function")}


# --- where it goes ---------------------------------------------------------------------------


@pytest.fixture
def gateway(actors: Actors, fake_upstream: FakeUpstream, catalogue: None) -> ProviderConnection:
    connection = ProviderConnection(
        team=actors.team,
        name="Gateway",
        kind=ConnectionKind.OPENAI_COMPATIBLE,
        base_url=fake_upstream.url + "/v1",
        listed_models=["gpt-4.1-mini", KIMI_K26],
    )
    return connection_save(connection=connection, token="sk-test-gateway")


def test_the_connection_the_document_names_is_taken(
    actors: Actors, rich: Conversation, gateway: ProviderConnection
) -> None:
    data = exported(actors, rich)
    data["playground"]["connection"] = {"name": "Gateway", "kind": "openai-compatible"}
    assert imported(actors, data).connection_id == gateway.pk
    data["playground"]["connection"] = {"name": "Elsewhere", "kind": "openai-compatible"}
    assert imported(actors, data).connection_id == gateway.pk  # by kind
    data["playground"]["connection"] = {"name": "Elsewhere", "kind": "engine"}
    assert imported(actors, data).connection_id == rich.connection_id  # the team's default


def test_a_model_the_connection_does_not_serve_is_refused_with_what_it_serves(
    actors: Actors, gateway: ProviderConnection
) -> None:
    with pytest.raises(ImportTargetRefused) as refused:
        imported(actors, {**body(user("Hi")), "model": "gpt-9"}, connection_id=gateway.pk)
    [message] = refused.value.message_dict["model_id"]
    assert message.startswith(
        "$.model: Gateway does not serve gpt-9: its last test listed gpt-4.1-mini, @cf/"
    )
    assert refused.value.connection == gateway
    assert imported(actors, body(user("Hi")), connection_id=gateway.pk, model_id="gpt-4.1-mini").model_id == (
        "gpt-4.1-mini"
    )


def test_a_model_outside_the_workers_ai_catalogue_is_refused(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    with pytest.raises(ImportTargetRefused) as refused:
        imported(actors, {**body(user("Hi")), "model": "@cf/made/up"})
    assert refused.value.message_dict["model_id"] == [
        "$.model: Workers AI (fake) serves the catalogue's Cloudflare Workers AI models, and @cf/made/up "
        "is not one of them: choose one."
    ]


def test_another_teams_connection_and_a_viewers_team_are_refused(
    actors: Actors, workers_connection: ProviderConnection, other_connection: ProviderConnection
) -> None:
    with pytest.raises(ImportTargetRefused) as refused:
        imported(actors, body(user("Hi")), connection_id=other_connection.pk)
    assert list(refused.value.message_dict) == ["connection"]
    with pytest.raises(ImportTargetRefused) as refused:
        conversation_import(
            user=actors.viewer, text=json.dumps(body(user("Hi"))), target=ImportTarget(team_id=actors.team.pk)
        )
    assert list(refused.value.message_dict) == ["team"]
    with pytest.raises(ImportTargetRefused):
        imported(actors, body(user("Hi")), team_id=actors.other_team.pk)


# --- refusals, each at its path ------------------------------------------------------------------


@pytest.mark.usefixtures("workers_connection")
class TestRefusals:
    def test_text_that_is_not_json_names_its_line_and_column(self, actors: Actors) -> None:
        assert problems(actors, '{\n  "messages": [\n    {"role": "user" "content": "Hi"}\n  ]\n}') == [
            ("$", "Not valid JSON: Expecting ',' delimiter at line 3, column 21.")
        ]
        assert problems(actors, '{"messages": [], "temperature": NaN}') == [
            ("$", "Not valid JSON: NaN is not a JSON number.")
        ]
        assert paths(actors, "   ") == ["$"]

    def test_wrong_shapes(self, actors: Actors) -> None:
        assert paths(actors, "42") == ["$"]
        assert paths(actors, {"model": KIMI_K26}) == ["$.messages"]
        assert paths(actors, {"messages": {"role": "user"}}) == ["$.messages"]
        assert paths(actors, body(user("Hi"), n=2, logprobs=True)) == ["$.n", "$.logprobs"]
        assert paths(actors, body("Hi", user(7), user([{"type": "audio"}]), user(""))) == [
            "$.messages[0]",
            "$.messages[1].content",
            "$.messages[2].content[0]",
            "$.messages[3].content",
        ]
        assert paths(actors, body(user("Hi"), {"role": "assistant", "content": ""})) == ["$.messages[1]"]
        assert paths(actors, body({"role": "user", "content": "Hi", "name": "ann"})) == ["$.messages[0].name"]

    def test_an_unknown_role_and_a_system_message_not_first(self, actors: Actors) -> None:
        assert problems(actors, body(user("Hi"), {"role": "robot", "content": "Beep"})) == [
            ("$.messages[1].role", "Unknown role 'robot': a message is system, user, assistant or tool.")
        ]
        assert paths(actors, body(user("Hi"), {"role": "system", "content": "Be brief."})) == [
            "$.messages[1].role"
        ]

    def test_a_tool_message_that_answers_no_call(self, actors: Actors) -> None:
        call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
        asks = {"role": "assistant", "content": None, "tool_calls": [call]}
        stray = {"role": "tool", "tool_call_id": "c2", "content": "Rain"}
        assert problems(actors, body(user("Weather?"), stray, tools=[WEATHER_SENT]))[0] == (
            "$.messages[1].tool_call_id",
            "Answers no call: no tool call 'c2' of the answer before it is waiting for its result (results "
            "follow their answer's tool_calls).",
        )
        assert paths(actors, body(user("Weather?"), asks, stray, tools=[WEATHER_SENT])) == [
            "$.messages[2].tool_call_id"
        ]
        # A call whose result never comes, before the next question.
        assert paths(actors, body(user("Weather?"), asks, user("Never mind"), tools=[WEATHER_SENT])) == [
            "$.messages[1].tool_calls[0]"
        ]

    def test_an_image_that_is_not_an_image(self, actors: Actors) -> None:
        content = [{"type": "text", "text": "Look"}, image_url(b"just some text, not a picture")]
        assert problems(actors, body(user(content))) == [
            (
                "$.messages[0].content[1].image_url.url",
                "It is a text file, whatever its name says: only PNG, JPEG, WebP or GIF images are accepted.",
            )
        ]
        link = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
        assert paths(actors, body(user([link]))) == ["$.messages[0].content[0].image_url.url"]
        broken = {"type": "image_url", "image_url": {"url": "data:image/png;base64,%%%"}}
        assert problems(actors, body(user([broken]))) == [
            ("$.messages[0].content[0].image_url.url", "Its base64 data does not decode.")
        ]

    def test_images_for_a_model_that_reads_text_only(self, actors: Actors) -> None:
        assert problems(actors, {**body(user([image_url(png())])), "model": LLAMA}) == [
            (
                "$.messages[0].content[0].image_url.url",
                "Llama 3.3 70B fp8 fast reads text only: it cannot be sent images.",
            )
        ]

    def test_a_document_too_large(self, actors: Actors, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(document, "DOCUMENT_MAX_BYTES", 1024 * 1024)
        assert problems(actors, body(user("x" * 1024 * 1024))) == [
            ("$", "The document is 1.0 MB; at most 1.0 MB are read.")
        ]

    def test_settings_the_model_does_not_take(self, actors: Actors) -> None:
        assert problems(
            actors, body(user("Hi"), model=GEMMA, tools=[WEATHER_SENT], reasoning_effort="low")
        ) == [
            ("$.reasoning_effort", "Gemma 4 26B A4B does not reason."),
            ("$.tools", "Gemma 4 26B A4B does not support tool calling (per the catalogue)."),
        ]

    def test_settings_checked_by_the_preset_rules_at_their_paths(self, actors: Actors) -> None:
        bad_tool = {"type": "function", "function": {"name": "has space"}}
        found = paths(
            actors,
            body(
                user("Hi"),
                tools=[bad_tool],
                tool_choice={"type": "function", "function": {"name": "nope"}},
                temperature=7,
                chat_template_kwargs={"thinking": "yes", "other": 1},
                response_format={"type": "xml"},
                playground={
                    "format": "playground-conversation",
                    "version": 1,
                    "auto_mock_steps": 99,
                    "use_affinity": "yes",
                    "connection": {"name": ""},
                },
            ),
        )
        assert sorted(found) == sorted(
            [
                "$.chat_template_kwargs.other",
                "$.tools[0].function.name",
                "$.tool_choice.function.name",
                "$.playground.auto_mock_steps",
                "$.response_format",
                "$.temperature",
                "$.chat_template_kwargs",
                "$.playground.use_affinity",
                "$.playground.connection",
            ]
        )

    def test_our_own_key(self, actors: Actors) -> None:
        ours = {"format": "playground-conversation", "version": 1}
        assert paths(actors, body(user("Hi"), playground={"format": "other"})) == ["$.playground.format"]
        assert paths(actors, body(user("Hi"), playground={**ours, "version": 2})) == ["$.playground.version"]
        assert paths(
            actors,
            body(
                user("Hi"),
                tools=[{**WEATHER_SENT, "mocks": []}],
                playground={
                    **ours,
                    "tool_mocks": {"clock": {"mocks": []}},
                    "variables": [{"name": "city", "type": "date"}, "x"],
                    "owner": "me",
                },
            ),
        ) == [
            "$.playground.owner",
            "$.playground.variables[0].type",
            "$.playground.variables[1]",
            "$.tools[0].mocks",
            "$.playground.tool_mocks.clock",
        ]

    def test_a_mock_problem_is_named_under_our_key(self, actors: Actors) -> None:
        ours = {"format": "playground-conversation", "version": 1, "tool_mocks": {"weather": {"mocks": "no"}}}
        assert paths(actors, body(user("Hi"), tools=[WEATHER_SENT], playground=ours)) == [
            "$.playground.tool_mocks.weather.mocks"
        ]

    def test_text_that_cannot_be_stored_or_is_too_long(self, actors: Actors) -> None:
        assert problems(actors, '{"messages": [{"role": "user", "content": "a\\u0000b"}]}') == [
            ("$.messages[0].content", "Holds a character that cannot be stored (a NUL or a lone surrogate).")
        ]
        assert problems(actors, body(user("x" * 100_001))) == [
            ("$.messages[0].content", "100,001 characters; at most 100,000.")
        ]
