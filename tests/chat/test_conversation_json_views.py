"""The export download and the import page: who may use them, a refused document kept in the
box with each problem at its path, an uploaded file read like a pasted one."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from playground.catalog.seed import KIMI_K26
from playground.chat.models import Conversation, MessageRole
from playground.providers.models import ProviderConnection
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.messages import message_append

pytestmark = pytest.mark.django_db

IMPORT = reverse("chat:conversation-import")
DOCUMENT = {
    "model": KIMI_K26,
    "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
}


@pytest.fixture
def answered(conversation: Conversation) -> Conversation:
    message_append(conversation=conversation, role=MessageRole.USER, content="Hi")
    message_append(conversation=conversation, role=MessageRole.ASSISTANT, content="Hello")
    return conversation


def test_export_downloads_the_document(actors: Actors, answered: Conversation) -> None:
    response = client_for(actors.viewer).get(reverse("chat:conversation-export", args=[answered.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="conversation-{answered.pk}.json"'
    data = json.loads(response.content)
    assert data["messages"][1:] == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
    ]


def test_another_teams_conversation_is_not_exported(actors: Actors, answered: Conversation) -> None:
    url = reverse("chat:conversation-export", args=[answered.pk])
    assert client_for(actors.outsider).get(url).status_code == 404
    assert client_for(None).get(url).status_code == 302  # to the login page


def test_the_chat_page_offers_export_and_copy(actors: Actors, answered: Conversation) -> None:
    page = (
        client_for(actors.viewer)
        .get(reverse("chat:conversation-detail", args=[answered.pk]))
        .content.decode()
    )
    url = reverse("chat:conversation-export", args=[answered.pk])
    assert f'href="{url}" id="export-link" download>Export JSON</a>' in page
    assert f'data-copy-url="{url}"' in page


def test_a_pasted_document_becomes_a_conversation(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    response = client_for(actors.teammate).post(
        IMPORT, {"text": json.dumps(DOCUMENT), "team": actors.team.pk, "connection": "", "model_id": ""}
    )
    conversation = Conversation.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("chat:conversation-detail", args=[conversation.pk])
    assert (conversation.user, conversation.connection) == (actors.teammate, workers_connection)


def test_an_uploaded_file_is_read_instead_of_the_box(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    upload = SimpleUploadedFile("chat.json", ("\ufeff" + json.dumps(DOCUMENT)).encode(), "application/json")
    response = client_for(actors.teammate).post(
        IMPORT,
        {"text": "ignored", "file": upload, "team": actors.team.pk, "connection": workers_connection.pk},
    )
    assert response.status_code == 302
    assert list(Conversation.objects.get().messages.values_list("content", flat=True)) == ["Hi", "Hello"]


def test_a_refused_document_stays_in_the_box_with_its_problems(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    text = '{"model": "x", "messages": [{"role": "robot", "content": "<b>Beep</b>"}]}'
    response = client_for(actors.teammate).post(IMPORT, {"text": text, "team": actors.team.pk})
    page = response.content.decode()
    assert response.status_code == 400
    assert "Nothing was imported" in page
    assert "$.messages[0].role: Unknown role &#x27;robot&#x27;" in page
    assert "&lt;b&gt;Beep&lt;/b&gt;" in page and "<b>Beep</b>" not in page  # kept, escaped
    assert not Conversation.objects.exists()


def test_a_refused_file_comes_back_as_text_in_the_box(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    upload = SimpleUploadedFile("chat.json", b'{"messages": [}', "application/json")
    response = client_for(actors.teammate).post(IMPORT, {"file": upload, "team": actors.team.pk})
    page = response.content.decode()
    assert "$: Not valid JSON: Expecting value at line 1, column 15." in page
    assert "{&quot;messages&quot;: [}</textarea>" in page
    upload = SimpleUploadedFile("chat.json", b"\xff\xfe{", "application/json")
    response = client_for(actors.teammate).post(IMPORT, {"file": upload, "team": actors.team.pk})
    assert "The file is not UTF-8 text" in response.content.decode()


def test_a_model_the_connection_does_not_serve_offers_its_models(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    text = json.dumps({**DOCUMENT, "model": "@cf/made/up"})
    response = client_for(actors.teammate).post(IMPORT, {"text": text, "team": actors.team.pk})
    page = response.content.decode()
    assert "$.model: Workers AI (fake) serves the catalogue&#x27;s" in page
    assert f'<option value="{workers_connection.pk}" selected>' in page  # the one it was tried on
    assert f'<option value="{KIMI_K26}">' in page  # the models it serves, to choose from


def test_changing_the_team_swaps_its_connections(
    actors: Actors, workers_connection: ProviderConnection, other_connection: ProviderConnection
) -> None:
    actors.other_team.memberships.create(user=actors.teammate, role="member")
    client = client_for(actors.teammate)
    page = client.get(IMPORT).content.decode()
    assert "Bravo" in page and "Bravo Workers AI" not in page  # Alpha's shown first
    fragment = client.get(
        IMPORT, {"team": actors.other_team.pk}, headers={"HX-Request": "true"}
    ).content.decode()
    assert fragment.lstrip().startswith('<div id="import-target"')
    assert "Bravo Workers AI" in fragment and "Workers AI (fake)" not in fragment


def test_a_viewer_is_told_there_is_no_connection_to_import_to(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    page = client_for(actors.viewer).get(IMPORT).content.decode()
    assert "No connection you can use" in page
    response = client_for(actors.viewer).post(IMPORT, {"text": json.dumps(DOCUMENT), "team": actors.team.pk})
    assert response.status_code == 400 and not Conversation.objects.exists()


def test_the_conversation_list_links_to_the_import(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    assert (
        f'href="{IMPORT}"'
        in client_for(actors.teammate).get(reverse("chat:conversation-list")).content.decode()
    )
