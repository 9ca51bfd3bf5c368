"""The composer: capability gates on the server, response formats, the non-streaming
fallback, and the request body kept as sent (against the loopback fake upstream)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import LazySettings
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K25, KIMI_K26
from playground.chat.domain.composer import (
    chat_request_build,
    composer_capabilities,
    response_format_check,
)
from playground.chat.models import Conversation, Message, MessageRole
from playground.chat.services.conversations import conversation_composer_update, conversation_create
from playground.chat.services.turns import ChatTurn, chat_turn_start
from playground.providers.models import ProviderConnection
from playground.providers.request_body import recorded_body
from playground.usage.models import UsageRecord
from tests.fakes.upstream import (
    FakeUpstream,
    chat_completion,
    envelope,
    json_reply,
    native_frame,
    sse,
    usage,
)
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.connections import WORKERS_TOKEN

GEMMA_4 = "@cf/google/gemma-4-26b-a4b-it"  # no JSON schema in the catalogue
GPT_OSS = "@cf/openai/gpt-oss-120b"  # reasons, but has no thinking switch
BEFORE_ALIAS, AFTER_ALIAS = dt.date(2026, 5, 29), dt.date(2026, 5, 30)
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}


def person_format() -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": PERSON}}


def start(actors: Actors, connection: ProviderConnection, model_id: str, **settings: Any) -> Conversation:
    conversation = conversation_create(user=actors.owner, connection_id=connection.pk, model_id=model_id)
    for name, value in settings.items():
        setattr(conversation, name, value)
    conversation.save()
    return conversation


def run_turn(actors: Actors, conversation: Conversation, text: str = "Invent a person.") -> ChatTurn:
    turn = chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text=text)

    async def drain() -> None:
        async for _ in turn.events():
            pass

    async_to_sync(drain)()
    return turn


@pytest.fixture
def engine_on_fake(settings: LazySettings, fake_upstream: FakeUpstream) -> None:
    settings.ENGINE_URL = fake_upstream.url
    fake_upstream.unscripted = ("/models", "/engine/v1/tokenize")  # the fake counts nothing: estimated


# --- parameters: what the kind and the model take ------------------------------------------


@pytest.mark.django_db
def test_a_parameter_the_kind_does_not_take_never_reaches_the_upstream(
    actors: Actors, engine_connection: ProviderConnection, engine_on_fake: None, fake_upstream: FakeUpstream
) -> None:
    # Stored behind the form's back (or before the kind stopped taking it): still never sent.
    conversation = start(
        actors,
        engine_connection,
        ENGINE_MODEL_ID,
        parameters={"presence_penalty": 1.5, "reasoning_effort": "high", "temperature": 0.2, "seed": 7},
    )

    run_turn(actors, conversation)

    sent = fake_upstream.requests[-1].json  # after the engine's model list, asked at creation
    assert sent["temperature"] == 0.2 and sent["seed"] == 7
    assert "presence_penalty" not in sent and "reasoning_effort" not in sent


@pytest.mark.django_db
def test_saving_a_parameter_the_kind_does_not_take_is_refused_with_the_reason_and_saves_nothing(
    actors: Actors, engine_connection: ProviderConnection
) -> None:
    conversation = start(actors, engine_connection, ENGINE_MODEL_ID)

    with pytest.raises(ValidationError) as refused:
        conversation_composer_update(
            user=actors.owner,
            conversation_id=conversation.pk,
            parameters={"temperature": 0.5, "frequency_penalty": 1.0, "reasoning_effort": "low"},
            response_format="text",
        )

    assert refused.value.message_dict == {
        "frequency_penalty": ["Embedded engine connections do not take frequency penalty."],
        "reasoning_effort": ["Embedded engine connections do not take reasoning effort."],
    }
    conversation.refresh_from_db()
    assert conversation.parameters == {}


@pytest.mark.django_db
def test_reasoning_controls_follow_the_catalogue(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    gemma = composer_capabilities(conversation=start(actors, workers_connection, GEMMA_4), day=AFTER_ALIAS)
    gpt = composer_capabilities(conversation=start(actors, workers_connection, GPT_OSS), day=AFTER_ALIAS)

    assert not gemma.available("reasoning_effort")
    assert gemma.controls["reasoning_effort"].reason == "Gemma 4 26B A4B does not reason."
    assert gpt.available("reasoning_effort") and not gpt.available("thinking")
    assert gpt.controls["thinking"].reason == "GPT-OSS 120B has no thinking switch; set its effort instead."


@pytest.mark.parametrize(
    ("model_id", "day", "field"),
    [
        (KIMI_K25, BEFORE_ALIAS, "enable_thinking"),  # K2.5 still serving
        (KIMI_K25, AFTER_ALIAS, "thinking"),  # K2.5 is served as K2.6 from 2026-05-30
        (KIMI_K26, BEFORE_ALIAS, "thinking"),
    ],
)
@pytest.mark.django_db
def test_the_thinking_switch_takes_the_field_name_of_the_model_serving_that_day(
    actors: Actors, workers_connection: ProviderConnection, model_id: str, day: dt.date, field: str
) -> None:
    conversation = start(
        actors, workers_connection, model_id, parameters={"thinking": False, "reasoning_effort": "low"}
    )

    request = chat_request_build(
        conversation=conversation, messages=[{"role": "user", "content": "hi"}], day=day
    )

    assert request.parameters == {"chat_template_kwargs": {field: False}, "reasoning_effort": "low"}


# --- response formats -------------------------------------------------------------------


@pytest.mark.django_db
def test_json_schema_is_refused_for_a_model_the_catalogue_says_cannot_follow_one(
    actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    conversation = start(actors, workers_connection, GEMMA_4)

    with pytest.raises(ValidationError) as refused:
        conversation_composer_update(
            user=actors.owner,
            conversation_id=conversation.pk,
            parameters={},
            response_format="json_schema",
            schema_name="person",
            schema_text=json.dumps(PERSON),
        )
    assert refused.value.message_dict == {
        "response_format": ["Gemma 4 26B A4B cannot follow a JSON schema (per the catalogue)."]
    }

    conversation.response_format = person_format()  # stored anyway: the turn refuses to send it
    conversation.save()
    with pytest.raises(ValidationError, match="cannot follow a JSON schema"):
        chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text="Invent a person.")
    assert not Message.objects.exists()
    assert fake_upstream.requests == []


@pytest.mark.django_db
def test_a_schema_is_checked_against_the_meta_schema_and_each_error_names_its_path(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    caps = composer_capabilities(conversation=start(actors, workers_connection, KIMI_K26), day=AFTER_ALIAS)
    broken = {"type": "object", "properties": {"age": {"type": "integr"}}, "required": "name"}

    with pytest.raises(ValidationError) as refused:
        response_format_check(caps=caps, kind="json_schema", name="person", schema_text=json.dumps(broken))

    errors = refused.value.message_dict["schema"]
    assert errors[0] == "$.required: 'name' is not of type 'array'"
    assert errors[1].startswith("$.properties.age.type: 'integr' is not valid")


@pytest.mark.django_db
def test_a_schema_that_is_not_json_or_has_a_bad_name_is_refused_with_where(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    caps = composer_capabilities(conversation=start(actors, workers_connection, KIMI_K26), day=AFTER_ALIAS)

    with pytest.raises(ValidationError) as refused:
        response_format_check(
            caps=caps, kind="json_schema", name="a person", schema_text='{"type": "object",}'
        )

    assert refused.value.message_dict == {
        "schema_name": ["A name of 1 to 64 letters, digits, _ or -."],
        "schema": ["Not valid JSON: Illegal trailing comma before end of object at line 1, column 18."],
    }
    assert response_format_check(
        caps=caps, kind="json_schema", name="person", schema_text=json.dumps(PERSON)
    ) == (person_format() | {"json_schema": {"name": "person", "strict": False, "schema": PERSON}})


# --- the non-streaming fallback -----------------------------------------------------------


@pytest.mark.django_db
def test_json_schema_goes_out_with_stream_false_where_the_model_cannot_stream_it(
    actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    conversation = start(actors, workers_connection, KIMI_K26, response_format=person_format())
    fake_upstream.script(
        json_reply(envelope(chat_completion('{"name": "Ada", "age": 36}', usage_body=usage(20, 9))))
    )

    turn = run_turn(actors, conversation)

    sent = fake_upstream.requests[0].json
    assert sent["stream"] is False and "stream_options" not in sent
    assert sent["response_format"] == person_format()
    answer = turn.assistant_message
    assert answer is not None and answer.structured == {"valid": True, "errors": []}
    assert answer.content == '{"name": "Ada", "age": 36}'
    record = UsageRecord.objects.get()
    assert record.streamed is False and record.completion_tokens == 9
    assert (record.schema_name, record.schema_valid, record.schema_errors) == ("person", True, [])


@pytest.mark.django_db
def test_the_engine_streams_json_schema_answers(
    actors: Actors, engine_connection: ProviderConnection, engine_on_fake: None, fake_upstream: FakeUpstream
) -> None:
    conversation = start(actors, engine_connection, ENGINE_MODEL_ID, response_format=person_format())
    fake_upstream.script(sse([native_frame('{"name": 1, '), native_frame('"age": 2}', usage=usage(5, 4))]))

    turn = run_turn(actors, conversation)

    assert fake_upstream.requests[-1].json["stream"] is True
    assert turn.assistant_message is not None
    assert turn.assistant_message.structured == {
        "valid": False,
        "errors": [{"path": "$.name", "message": "1 is not of type 'string'"}],
    }
    record = UsageRecord.objects.get()  # the record judges the streamed answer as the message does
    assert (record.schema_name, record.schema_valid) == ("person", False)
    assert record.schema_errors == turn.assistant_message.structured["errors"]


# --- the request as sent --------------------------------------------------------------------


@pytest.mark.django_db
def test_the_record_keeps_exactly_the_body_the_upstream_received_and_its_http_status(
    actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    conversation = start(
        actors, workers_connection, KIMI_K26, parameters={"temperature": 0.3, "stop": ["END"]}
    )

    run_turn(actors, conversation, text="Hello there")

    record = UsageRecord.objects.get()
    assert record.request_body == fake_upstream.requests[0].json
    assert record.request_body["temperature"] == 0.3 and record.request_body["stop"] == ["END"]
    assert record.http_status == 200


@pytest.mark.django_db
def test_a_token_pasted_into_a_message_is_sent_but_not_stored(
    actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    conversation = start(actors, workers_connection, KIMI_K26)

    run_turn(actors, conversation, text=f"my key is {WORKERS_TOKEN}, is it safe?")

    received = fake_upstream.requests[0].json
    stored = UsageRecord.objects.get().request_body
    assert received is not None and stored is not None
    assert received["messages"][-1]["content"] == f"my key is {WORKERS_TOKEN}, is it safe?"
    assert stored["messages"][-1]["content"] == "my key is [redacted], is it safe?"
    assert WORKERS_TOKEN not in json.dumps(stored)
    received["messages"][-1]["content"] = stored["messages"][-1]["content"]
    assert stored == received  # nothing else differs


def test_an_image_in_a_kept_body_is_replaced_by_its_hash_type_and_size() -> None:
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}},
                ],
            }
        ]
    }

    kept = recorded_body(body, secrets=["s3cret"])

    assert kept["messages"][0]["content"][1]["image_url"]["url"] == {
        "sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        "content_type": "image/png",
        "bytes": 5,
    }
    assert kept["messages"][0]["content"][0] == {"type": "text", "text": "What is this?"}


# --- the pages --------------------------------------------------------------------------------


def htmx_post(client: Client, url: str, data: dict[str, Any]) -> Any:
    return client.post(url, data, headers={"HX-Request": "true"})


@pytest.mark.django_db
def test_the_settings_panel_saves_and_an_invalid_schema_is_shown_inline_with_nothing_saved(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    conversation = start(actors, workers_connection, KIMI_K26)
    client = client_for(actors.teammate)
    url = reverse("chat:conversation-composer", args=[conversation.pk])
    form = {
        "temperature": "0.4",
        "max_tokens": "300",
        "response_format": "json_schema",
        "schema_name": "person",
    }

    refused = htmx_post(
        client, url, {**form, "schema": '{"type": "object", "properties": {"a": {"type": 5}}}'}
    )
    assert refused.status_code == 200
    assert "Nothing was saved" in refused.text and "$.properties.a.type: 5 is not valid" in refused.text
    conversation.refresh_from_db()
    assert conversation.parameters == {} and conversation.response_format is None

    saved = htmx_post(client, url, {**form, "schema": json.dumps(PERSON)})
    assert "Saved" in saved.text
    conversation.refresh_from_db()
    assert conversation.parameters == {"temperature": 0.4, "max_tokens": 300}
    assert conversation.response_format == {
        "type": "json_schema",
        "json_schema": {"name": "person", "strict": False, "schema": PERSON},
    }


@pytest.mark.django_db
def test_the_page_disables_what_the_model_cannot_do_with_the_reason(
    actors: Actors, engine_connection: ProviderConnection
) -> None:
    conversation = start(actors, engine_connection, ENGINE_MODEL_ID)
    client = client_for(actors.owner)

    page = client.get(reverse("chat:conversation-detail", args=[conversation.pk])).text

    assert '<input type="number" name="presence_penalty" min="-2" max="2" step="any" disabled' in page
    assert "Embedded engine connections do not take presence penalty." in page
    assert '<select name="reasoning_effort" disabled' in page and '<select name="thinking" disabled' in page
    assert '<input type="number" name="temperature" min="0" max="2" step="any" aria' in page  # not disabled
    assert 'value="json_schema" disabled' not in page  # the engine follows schemas


@pytest.mark.django_db
def test_view_request_is_for_the_team_only(
    actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    conversation = start(actors, workers_connection, KIMI_K26)
    turn = run_turn(actors, conversation, text="Hello there")
    assert turn.assistant_message is not None
    url = reverse("chat:message-request", args=[conversation.pk, turn.assistant_message.pk])
    teammate, outsider = Client(), Client()
    teammate.force_login(actors.teammate)
    outsider.force_login(actors.outsider)

    shown = teammate.get(url, headers={"HX-Request": "true"})

    assert shown.status_code == 200
    assert "Hello there" in shown.text and "200" in shown.text and "prompt_tokens" in shown.text
    assert outsider.get(url).status_code == 404
    question = Message.objects.get(role=MessageRole.USER)
    assert (
        teammate.get(reverse("chat:message-request", args=[conversation.pk, question.pk])).status_code == 404
    )
