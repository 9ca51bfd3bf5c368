"""Managing conversations: rename, delete (files go, usage records stay), and changing the
connection or model of the next turn (checked at the loopback fake upstream)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.urls import reverse

from playground.catalog.seed import KIMI_K26
from playground.chat.domain.attachments import attachment_store, image_clean
from playground.chat.models import Attachment, Conversation, Message, MessageRole
from playground.chat.services.conversations import conversation_model_change
from playground.chat.services.turns import ChatTurn, chat_turn_start
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord, UsageStatus
from tests.fakes.upstream import FakeUpstream, native_frame, sse, usage
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.images import png

pytestmark = pytest.mark.django_db

SCOUT = "@cf/meta/llama-4-scout-17b-16e-instruct"  # reads images; no JSON schema, per the catalogue
GEMMA4 = "@cf/google/gemma-4-26b-a4b-it"  # neither tools nor a JSON schema, per the catalogue


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def send(actors: Actors, conversation: Conversation, text: str, **kwargs: Any) -> ChatTurn:
    turn = chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text=text, **kwargs)

    async def run() -> None:
        async for _ in turn.events():
            pass

    async_to_sync(run)()
    return turn


def rename_url(conversation: Conversation) -> str:
    return reverse("chat:conversation-rename", args=[conversation.pk])


def delete_url(conversation: Conversation) -> str:
    return reverse("chat:conversation-delete", args=[conversation.pk])


def model_url(conversation: Conversation) -> str:
    return reverse("chat:conversation-model", args=[conversation.pk])


# --- rename ---------------------------------------------------------------------------------


def test_a_member_renames_a_conversation_and_it_keeps_its_place_in_the_list(
    actors: Actors, conversation: Conversation
) -> None:
    before = Conversation.objects.get(pk=conversation.pk).updated_at

    response = client_for(actors.teammate).post(rename_url(conversation), {"title": "  Q3  planning\nnotes "})

    assert response.status_code == 302
    conversation.refresh_from_db()
    assert conversation.title == "Q3 planning notes"  # one line, as the list shows it
    assert conversation.updated_at == before


def test_renaming_from_the_list_redraws_the_row_and_from_the_page_the_title_and_the_sidebar(
    actors: Actors, conversation: Conversation
) -> None:
    client = client_for(actors.owner)
    row = client.post(
        rename_url(conversation),
        {"title": "Invoices <2026>", "next": "list"},
        headers={"HX-Request": "true", "HX-Target": f"conversation-row-{conversation.pk}"},
    ).content.decode()
    assert f'<li class="conversation-row" id="conversation-row-{conversation.pk}">' in row
    assert "Invoices &lt;2026&gt;" in row

    page = client.post(
        rename_url(conversation),
        {"title": "Invoices 2027"},
        headers={"HX-Request": "true", "HX-Target": "chat-title-bar"},
    ).content.decode()
    assert 'id="chat-title">Invoices 2027</h1>' in page
    sidebar = f'id="sidebar-conversation-{conversation.pk}" class="is-current" aria-current="page"'
    assert f'{sidebar} hx-swap-oob="true">Invoices 2027</a>' in page


def test_an_empty_or_too_long_title_is_refused_and_nothing_changes(
    actors: Actors, conversation: Conversation
) -> None:
    conversation.title = "Kept"
    conversation.save()
    client = client_for(actors.owner)
    headers = {"HX-Request": "true", "HX-Target": f"conversation-row-{conversation.pk}"}

    empty = client.post(rename_url(conversation), {"title": "   "}, headers=headers).content.decode()
    long = client.post(rename_url(conversation), {"title": "x" * 201}, headers=headers).content.decode()

    assert "Type a title." in empty
    assert "A title can be at most 200 characters." in long
    assert client.post(rename_url(conversation), {"title": ""}).status_code == 400
    conversation.refresh_from_db()
    assert conversation.title == "Kept"


def test_a_viewer_cannot_rename_or_delete_and_sees_no_controls_for_it(
    actors: Actors, conversation: Conversation
) -> None:
    client = client_for(actors.viewer)

    assert client.post(rename_url(conversation), {"title": "Mine now"}).status_code == 403
    assert client.post(delete_url(conversation)).status_code == 403
    assert client.get(delete_url(conversation)).status_code == 403
    listing = client.get(reverse("chat:conversation-list")).content.decode()
    assert f"conversation-row-{conversation.pk}" in listing
    assert rename_url(conversation) not in listing
    assert Conversation.objects.filter(pk=conversation.pk, title="").exists()


# --- delete ---------------------------------------------------------------------------------


def test_deleting_a_conversation_removes_its_messages_images_and_files_and_keeps_its_usage_records(
    actors: Actors,
    workers_connection: ProviderConnection,
    media_root: Path,
    django_capture_on_commit_callbacks: Any,
) -> None:
    conversation = Conversation.objects.create(
        team=actors.team, user=actors.owner, connection=workers_connection, model_id=SCOUT
    )
    sent = attachment_store(conversation=conversation, image=image_clean(png()))
    send(actors, conversation, "What is in this image?", attachment_ids=[sent.pk])
    pending = attachment_store(conversation=conversation, image=image_clean(png(color=(0, 90, 200))))
    files = [Path(sent.file.path), Path(pending.file.path)]
    assert all(file.exists() for file in files)
    record = UsageRecord.objects.get(conversation_id=conversation.pk)

    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(actors.teammate).post(delete_url(conversation))

    assert response.status_code == 302
    assert response["Location"] == reverse("chat:conversation-list")
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not Message.objects.filter(conversation_id=conversation.pk).exists()
    assert not Attachment.objects.exists()
    assert not any(file.exists() for file in files)
    kept = UsageRecord.objects.get(pk=record.pk)  # never deleted: it keeps what the turn cost
    assert kept.conversation_id == conversation.pk
    assert kept.total_cost == record.total_cost > 0
    log = client_for(actors.owner).get(reverse("analytics:log")).content.decode()
    assert f"Conversation #{conversation.pk} (deleted)" in log


def test_the_delete_page_says_what_goes_and_what_stays_and_htmx_deletes_without_it(
    actors: Actors, conversation: Conversation
) -> None:
    client = client_for(actors.owner)
    send(actors, conversation, "Hello")

    page = client.get(delete_url(conversation)).content.decode()
    assert "Its 2 messages and 0 images are deleted" in page
    assert "Its usage records stay" in page

    from_page = client.post(delete_url(conversation), headers={"HX-Request": "true", "HX-Target": "body"})
    assert from_page["HX-Redirect"] == reverse("chat:conversation-list")
    assert not Conversation.objects.filter(pk=conversation.pk).exists()


def test_deleting_from_the_list_answers_an_empty_row(actors: Actors, conversation: Conversation) -> None:
    response = client_for(actors.owner).post(
        delete_url(conversation),
        headers={"HX-Request": "true", "HX-Target": f"conversation-row-{conversation.pk}"},
    )
    assert response.status_code == 200
    assert response.content == b""
    assert not Conversation.objects.filter(pk=conversation.pk).exists()


# --- the next turn's connection or model ---------------------------------------------------


def test_a_model_change_reaches_the_upstream_and_each_answer_names_its_model(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    send(actors, conversation, "First, on Kimi")
    client = client_for(actors.owner)
    page = client.get(reverse("chat:conversation-detail", args=[conversation.pk])).content.decode()
    assert "Answered by" not in page  # one model so far: nothing to tell apart

    response = client.post(
        model_url(conversation),
        {"connection": conversation.connection_id, "model_id": SCOUT},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert response["HX-Refresh"] == "true"
    turn = send(actors, conversation, "Second, on Scout")

    first, second = fake_upstream.requests
    assert first.path.endswith(f"/ai/run/{KIMI_K26}")
    assert second.path.endswith(f"/ai/run/{SCOUT}")
    assert [m["content"] for m in second.json["messages"] if m["role"] == "user"] == [
        "First, on Kimi",
        "Second, on Scout",
    ]
    assert second.headers["x-session-affinity"] == conversation.affinity_key  # the conversation's own key
    records = list(UsageRecord.objects.filter(conversation_id=conversation.pk).order_by("created_at"))
    assert [record.model_id for record in records] == [KIMI_K26, SCOUT]
    assert turn.model_label == SCOUT  # the streamed answer names it too
    page = client.get(reverse("chat:conversation-detail", args=[conversation.pk])).content.decode()
    assert f"Answered by <code>{KIMI_K26}</code>" in page
    assert f"Answered by <code>{SCOUT}</code>" in page
    assert f'<span class="composer-summary">{SCOUT}</span>' in page


def test_moving_to_another_connection_of_the_team_sends_there(
    actors: Actors,
    conversation: Conversation,
    openai_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
) -> None:
    conversation_model_change(
        user=actors.owner,
        conversation_id=conversation.pk,
        connection_id=openai_connection.pk,
        model_id="gpt-4.1-mini",
    )
    send(actors, conversation, "Hi there")

    request = fake_upstream.requests[-1]
    assert request.path == "/v1/chat/completions"
    assert request.json["model"] == "gpt-4.1-mini"
    assert request.headers["authorization"] == "Bearer sk-test-gateway"
    assert UsageRecord.objects.get(conversation_id=conversation.pk).connection_id == openai_connection.pk


def test_a_typed_model_id_works_where_the_kind_takes_any(
    actors: Actors, conversation: Conversation, openai_connection: ProviderConnection
) -> None:
    response = client_for(actors.owner).post(
        model_url(conversation), {"connection": openai_connection.pk, "custom_model_id": "my-finetune-7"}
    )
    assert response.status_code == 302
    conversation.refresh_from_db()
    assert (conversation.connection_id, conversation.model_id) == (openai_connection.pk, "my-finetune-7")


def test_a_model_that_cannot_take_the_conversations_settings_is_refused_with_the_reason(
    actors: Actors, conversation: Conversation
) -> None:
    conversation.tools = [
        {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    ]
    conversation.save()
    with pytest.raises(
        ValidationError, match=r"does not support tool calling.*Remove this conversation's tools first"
    ):
        conversation_model_change(
            user=actors.owner,
            conversation_id=conversation.pk,
            connection_id=conversation.connection_id or 0,
            model_id=GEMMA4,
        )
    conversation.tools = []
    conversation.response_format = {
        "type": "json_schema",
        "json_schema": {"name": "x", "schema": {"type": "object"}},
    }
    conversation.save()
    response = client_for(actors.owner).post(
        model_url(conversation),
        {"connection": conversation.connection_id, "model_id": SCOUT},
        headers={"HX-Request": "true"},
    )
    assert "Set the response format to text or JSON object first." in response.content.decode()
    conversation.refresh_from_db()
    assert conversation.model_id == KIMI_K26


def test_another_teams_connection_is_not_offered_and_refused(
    actors: Actors,
    conversation: Conversation,
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
) -> None:
    from playground.accounts.models import Membership, Role
    from tests.support.connections import workers_connection_for

    # The owner also belongs to Bravo: its connection is theirs, but not this conversation's team's.
    Membership.objects.create(team=actors.other_team, user=actors.owner, role=Role.MEMBER)
    bravo = workers_connection_for(actors.other_team, fake_upstream, name="Bravo's", token="cf-bravo")

    page = (
        client_for(actors.owner)
        .get(reverse("chat:conversation-detail", args=[conversation.pk]))
        .content.decode()
    )
    response = client_for(actors.owner).post(
        model_url(conversation), {"connection": bravo.pk, "model_id": KIMI_K26}
    )

    assert "Bravo&#x27;s" not in page and "Bravo's" not in page
    assert response.status_code == 400
    with pytest.raises(ValidationError, match="this conversation's team's connections"):
        conversation_model_change(
            user=actors.owner, conversation_id=conversation.pk, connection_id=bravo.pk, model_id=KIMI_K26
        )
    conversation.refresh_from_db()
    assert conversation.connection_id == workers_connection.pk


# --- scoping: another team's conversation is a 404 everywhere ----------------------------------


@pytest.mark.parametrize(
    ("method", "name", "data"),
    [
        ("post", "chat:conversation-rename", {"title": "Taken"}),
        ("get", "chat:conversation-delete", {}),
        ("post", "chat:conversation-delete", {}),
        ("post", "chat:conversation-model", {"model_id": KIMI_K26}),
    ],
)
def test_another_teams_conversation_is_a_404_for_every_new_action(
    actors: Actors, other_conversation: Conversation, method: str, name: str, data: dict[str, Any]
) -> None:
    data = {**data, "connection": other_conversation.connection_id} if "model" in name else data
    client = client_for(actors.owner)

    response = getattr(client, method)(reverse(name, args=[other_conversation.pk]), data)
    htmx = getattr(client, method)(
        reverse(name, args=[other_conversation.pk]), data, headers={"HX-Request": "true"}
    )

    assert response.status_code == htmx.status_code == 404
    other_conversation.refresh_from_db()
    assert other_conversation.title == ""
    assert other_conversation.model_id == KIMI_K26


def test_the_chat_page_offers_rename_delete_and_model_to_members_only(
    actors: Actors, conversation: Conversation
) -> None:
    url = reverse("chat:conversation-detail", args=[conversation.pk])
    member = client_for(actors.teammate).get(url).content.decode()
    viewer = client_for(actors.viewer).get(url).content.decode()

    for control in (rename_url(conversation), delete_url(conversation), model_url(conversation)):
        assert control in member
        assert control not in viewer


def test_messages_and_answers_have_copy_buttons_with_their_raw_text(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(
        sse([native_frame("Use `ls`:\n\n```sh\nls -la <dir>\n```"), native_frame("", usage=usage(9, 7))])
    )
    turn = send(actors, conversation, "How do I list files?")
    assert turn.assistant_message is not None

    page = (
        client_for(actors.owner)
        .get(reverse("chat:conversation-detail", args=[conversation.pk]))
        .content.decode()
    )

    question, answer = f"message-{turn.user_message.pk}", f"message-{turn.assistant_message.pk}"
    assert f'data-copy="{question}-text"' in page
    assert f'data-copy="{answer}-raw"' in page
    assert f'<div hidden id="{answer}-raw">Use `ls`:\n\n```sh\nls -la &lt;dir&gt;\n```</div>' in page
    assert "<pre><code" in page  # the code block the page gives its own Copy button (static/js/copy.js)
    assert turn.assistant_message.role == MessageRole.ASSISTANT
    assert UsageRecord.objects.get(conversation_id=conversation.pk).status == UsageStatus.OK
