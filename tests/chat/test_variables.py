"""Prompt variables in a conversation (issue 36): the Variables drawer saves them, a new placeholder
in the system prompt declares one, a turn sends the values and its record keeps them, an unfilled
variable refuses the send (and the pre-flight says so), and a preset version carries them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from playground.chat.models import Conversation, Message, MessageRole
from playground.chat.services.conversations import (
    conversation_composer_update,
    conversation_variables_update,
)
from playground.chat.services.preset_setups import conversation_from_preset, conversation_preset_save
from playground.chat.services.turns import turn_request_build
from playground.presets.variables import VariablesUnfilled
from playground.usage.models import UsageRecord
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.sockets import Socket

PROMPT = "You support {{customer}}, who has {{seats}} seats and this profile: {{profile}}."
FILLED = [
    {"name": "customer", "type": "text", "value": "Ada Lovelace"},
    {"name": "seats", "type": "number", "value": "12"},
    {"name": "profile", "type": "json", "value": '{"tier": "gold"}'},
]


def with_prompt(conversation: Conversation, prompt: str = PROMPT) -> Conversation:
    return conversation_composer_update(
        user=conversation.user,
        conversation_id=conversation.pk,
        parameters={},
        response_format="text",
        system_prompt=prompt,
    )


@pytest.mark.django_db
def test_a_placeholder_new_to_the_system_prompt_declares_a_text_variable_and_keeps_the_others(
    conversation: Conversation,
) -> None:
    conversation_variables_update(
        user=conversation.user,
        conversation_id=conversation.pk,
        rows=[{"name": "seats", "type": "number", "value": "3"}],
    )

    conversation = with_prompt(conversation)

    assert conversation.variables == [
        {"name": "seats", "type": "number", "value": "3"},
        {"name": "customer", "type": "text", "value": ""},
        {"name": "profile", "type": "text", "value": ""},
    ]


@pytest.mark.django_db
def test_the_next_request_sends_the_values_and_names_them_and_the_history_keeps_placeholders(
    conversation: Conversation,
) -> None:
    with_prompt(conversation)
    conversation_variables_update(user=conversation.user, conversation_id=conversation.pk, rows=FILLED)
    conversation.refresh_from_db()

    request = turn_request_build(conversation=conversation, text="Hello from {{customer}}")

    assert request.messages[0]["content"] == (
        'You support Ada Lovelace, who has 12 seats and this profile: {"tier": "gold"}.'
    )
    assert request.messages[-1]["content"] == "Hello from Ada Lovelace"
    assert request.variables == {"customer": "Ada Lovelace", "seats": "12", "profile": '{"tier": "gold"}'}
    assert conversation.system_prompt == PROMPT


@pytest.mark.django_db
def test_the_drawer_refuses_a_bad_number_and_bad_json_at_their_rows_and_saves_nothing(
    actors: Actors, conversation: Conversation
) -> None:
    url = reverse("chat:conversation-variables", args=[conversation.pk])
    data = {
        "name": ["customer", "seats", "profile", ""],
        "type": ["text", "number", "json", "text"],
        "value": ["Ada", "a dozen", "{tier: gold}", ""],
    }

    page = client_for(actors.owner).post(url, data, headers={"HX-Request": "true"})

    body = page.content.decode()
    assert page.status_code == 200  # htmx swaps the drawer with its errors
    assert "Nothing was saved: fix the fields marked below." in body
    assert "{{seats}} is a number; &#x27;a dozen&#x27; is not one." in body
    assert "{{profile}} is JSON, and its value does not parse" in body
    assert ">Ada</textarea>" in body and ">a dozen</textarea>" in body  # what was typed stays
    conversation.refresh_from_db()
    assert conversation.variables == []

    plain = client_for(actors.owner).post(url, data)
    assert plain.status_code == 400 and "Back to the conversation" in plain.content.decode()


@pytest.mark.django_db
def test_the_drawer_saves_rows_drops_a_cleared_name_declares_a_placeholder_and_refuses_viewers(
    actors: Actors, conversation: Conversation
) -> None:
    url = reverse("chat:conversation-variables", args=[conversation.pk])
    with_prompt(conversation, "Hi {{customer}}, {{ticket}}")
    conversation.refresh_from_db()
    assert [row["name"] for row in conversation.variables] == ["customer", "ticket"]

    page = client_for(actors.owner).post(
        url,
        {"name": ["customer", "", "plan"], "type": ["text", "text", "json"], "value": ["Ada", "", "{}"]},
        headers={"HX-Request": "true"},
    )

    assert "Saved: the next message is sent with these values." in page.content.decode()
    assert "ticket" in page.content.decode()  # still in the prompt: offered to be made a variable
    conversation.refresh_from_db()
    assert conversation.variables == [
        {"name": "customer", "type": "text", "value": "Ada"},
        {"name": "plan", "type": "json", "value": "{}"},
    ]
    client_for(actors.owner).post(
        url,
        {"name": ["customer", "plan"], "type": ["text", "json"], "value": ["Ada", "{}"], "declare": "ticket"},
        headers={"HX-Request": "true"},
    )
    conversation.refresh_from_db()
    assert [row["name"] for row in conversation.variables] == ["customer", "plan", "ticket"]

    refused = client_for(actors.viewer).post(url, {"name": ["x"], "type": ["text"], "value": ["1"]})
    assert refused.status_code in (400, 403, 404)
    conversation.refresh_from_db()
    assert [row["name"] for row in conversation.variables] == ["customer", "plan", "ticket"]


@pytest.mark.django_db
def test_the_conversation_page_loads_its_branch_once_for_the_messages_and_the_drawer(
    actors: Actors, conversation: Conversation
) -> None:
    with_prompt(conversation, "Hi {{customer}}")
    asked = Message.objects.create(
        conversation=conversation, role=MessageRole.USER, content="About {{ticket}}"
    )
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf=asked)

    with CaptureQueriesContext(connection) as queries:
        page = client_for(actors.owner).get(reverse("chat:conversation-detail", args=[conversation.pk]))

    assert page.status_code == 200
    assert "Make ticket a variable" in page.content.decode()  # the drawer saw the branch's message
    tree_reads = [q["sql"] for q in queries.captured_queries if 'FROM "chat_message"' in q["sql"]]
    assert len(tree_reads) == 2, tree_reads  # the tree's ids once, then the branch's rows once


@pytest.mark.django_db
def test_the_preflight_says_send_will_be_refused_while_a_used_variable_is_empty(
    actors: Actors, conversation: Conversation
) -> None:
    with_prompt(conversation, "You support {{customer}}.")
    url = reverse("chat:preflight", args=[conversation.pk])

    page = client_for(actors.owner).post(url, {"message": "Hello"})

    assert "Send will be refused: Fill in {{customer}}: the prompt uses it and it has no value." in (
        page.content.decode()
    )
    with pytest.raises(VariablesUnfilled):
        turn_request_build(conversation=Conversation.objects.get(pk=conversation.pk), text="Hello")


@pytest.mark.django_db
def test_a_preset_version_carries_the_variables_a_new_value_keeps_it_and_a_new_type_detaches_it(
    actors: Actors, conversation: Conversation
) -> None:
    with_prompt(conversation)
    conversation_variables_update(user=actors.owner, conversation_id=conversation.pk, rows=FILLED)
    version = conversation_preset_save(
        user=actors.owner, conversation_id=conversation.pk, preset_id=None, name="Support agent"
    )
    assert version.setup["variables"] == FILLED

    started = conversation_from_preset(user=actors.owner, version_id=version.pk)
    assert started.variables == FILLED and started.preset_version_id == version.pk

    new_value = [{**FILLED[0], "value": "Grace Hopper"}, *FILLED[1:]]
    conversation_variables_update(user=actors.owner, conversation_id=started.pk, rows=new_value)
    started.refresh_from_db()
    assert started.preset_version_id == version.pk  # a value is what a variable is for

    new_type = [*new_value[:2], {**FILLED[2], "type": "text"}]
    conversation_variables_update(user=actors.owner, conversation_id=started.pk, rows=new_type)
    started.refresh_from_db()
    assert started.preset_version_id is None


@pytest.mark.django_db(transaction=True)
async def test_a_turn_sends_the_values_its_record_keeps_them_and_an_empty_one_sends_nothing(
    open_socket: Callable[[str | None, int], Socket], conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    await Conversation.objects.filter(pk=conversation.pk).aupdate(
        system_prompt="You support {{customer}}.",
        variables=[{"name": "customer", "type": "text", "value": ""}],
    )
    socket = open_socket("owner", conversation.pk)
    assert (await socket.connect())[0]
    await socket.send(action="send", message="Hello")
    notice = await socket.receive()
    assert "Fill in {{customer}}: the prompt uses it and it has no value." in notice
    await socket.disconnect()
    assert fake_upstream.requests == []
    assert not await Message.objects.filter(conversation_id=conversation.pk).aexists()

    await Conversation.objects.filter(pk=conversation.pk).aupdate(
        variables=[{"name": "customer", "type": "text", "value": "Ada"}]
    )
    await open_socket("owner", conversation.pk).exchange("I am {{customer}}; and {{unknown}} stays.")

    sent = fake_upstream.requests[-1].json["messages"]
    assert sent[0] == {"role": "system", "content": "You support Ada."}
    assert sent[-1] == {"role": "user", "content": "I am Ada; and {{unknown}} stays."}
    record = await UsageRecord.objects.aget(conversation_id=conversation.pk)
    assert record.variables == {"customer": "Ada"}
