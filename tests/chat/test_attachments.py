"""Image attachments end to end on the server: upload, team scoping, the capability gate,
and what a turn with images sends upstream."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from playground.catalog.seed import ENGINE_MODEL_ID
from playground.chat.domain.attachments import CleanImage, attachment_store, image_clean
from playground.chat.models import Attachment, Conversation, Message, MessageRole
from playground.chat.services.conversations import conversation_create
from playground.chat.services.history import upstream_messages
from playground.chat.services.turns import chat_turn_start
from playground.chat.sockets.commands import BadCommand, SendCommand, chat_command_parse
from playground.providers.images import IMAGE_PROMPT_CHARS
from playground.providers.models import ProviderConnection
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.images import SVG, jpeg_with_gps, png
from tests.support.messages import message_append

pytestmark = pytest.mark.django_db

SCOUT = "@cf/meta/llama-4-scout-17b-16e-instruct"  # reads images, per the catalogue
TEXT_ONLY = "SmolLM2 135M Instruct (embedded engine) reads text only: it cannot be sent images."


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def vision_chat(actors: Actors, workers_connection: ProviderConnection) -> Conversation:
    return conversation_create(user=actors.owner, connection_id=workers_connection.pk, model_id=SCOUT)


@pytest.fixture
def engine_chat(actors: Actors, engine_connection: ProviderConnection) -> Conversation:
    return conversation_create(
        user=actors.owner, connection_id=engine_connection.pk, model_id=ENGINE_MODEL_ID
    )


def upload(client: Client, conversation: Conversation, *files: tuple[str, bytes]) -> str:
    url = reverse("chat:attachment-upload", args=[conversation.pk])
    uploads = [SimpleUploadedFile(name, data, content_type="image/png") for name, data in files]
    response = client.post(url, {"images": uploads}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    return response.content.decode()


def stored(conversation: Conversation, data: bytes) -> Attachment:
    return attachment_store(conversation=conversation, image=image_clean(data))


# --- upload -----------------------------------------------------------------------------------


def test_a_member_uploads_two_images_and_gets_a_chip_with_a_hidden_id_for_each(
    actors: Actors, vision_chat: Conversation, media_root: Path
) -> None:
    html = upload(client_for(actors.teammate), vision_chat, ("a.png", png()), ("b.jpg", jpeg_with_gps()))

    first, second = Attachment.objects.order_by("pk")
    assert (first.content_type, second.content_type) == ("image/png", "image/jpeg")
    assert first.message is None and first.conversation == vision_chat
    for attachment in (first, second):
        assert f'name="attachment" value="{attachment.pk}"' in html
        assert reverse("chat:attachment", args=[attachment.pk]) in html
        assert attachment.file.name is not None
        data = (media_root / attachment.file.name).read_bytes()  # under the private MEDIA_ROOT
        assert hashlib.sha256(data).hexdigest() == attachment.sha256
        assert len(data) == attachment.size_bytes


def test_an_svg_named_png_is_refused_with_the_reason_and_nothing_is_stored(
    actors: Actors, vision_chat: Conversation
) -> None:
    html = upload(client_for(actors.owner), vision_chat, ("drawing.png", SVG), ("ok.png", png()))

    assert "drawing.png" in html and "It is an SVG drawing" in html
    assert Attachment.objects.count() == 1  # the good file is kept


def test_a_file_over_the_size_limit_is_named_and_refused(
    actors: Actors, vision_chat: Conversation, settings: Any
) -> None:
    settings.ATTACHMENT_MAX_BYTES = 2_000

    html = upload(
        client_for(actors.owner), vision_chat, ("huge.png", png(600, 600, color=(1, 2, 3)) + b"\0" * 4_000)
    )

    assert "huge.png" in html and "larger than" in html
    assert not Attachment.objects.exists()


def test_more_than_eight_waiting_images_are_refused(actors: Actors, vision_chat: Conversation) -> None:
    files = [(f"{n}.png", png(8 + n, 8)) for n in range(9)]

    html = upload(client_for(actors.owner), vision_chat, *files)

    assert Attachment.objects.count() == 8
    assert "8.png" in html and "at most 8 images" in html


def test_an_outsider_cannot_upload_to_another_teams_conversation(
    actors: Actors, vision_chat: Conversation
) -> None:
    url = reverse("chat:attachment-upload", args=[vision_chat.pk])
    response = client_for(actors.outsider).post(url, {"images": [SimpleUploadedFile("a.png", png())]})

    assert response.status_code == 404
    assert not Attachment.objects.exists()


def test_a_viewer_cannot_upload(actors: Actors, vision_chat: Conversation) -> None:
    url = reverse("chat:attachment-upload", args=[vision_chat.pk])
    response = client_for(actors.viewer).post(url, {"images": [SimpleUploadedFile("a.png", png())]})

    assert response.status_code == 403
    assert not Attachment.objects.exists()


def test_an_upload_needs_the_csrf_token(actors: Actors, vision_chat: Conversation) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(actors.owner)
    url = reverse("chat:attachment-upload", args=[vision_chat.pk])

    response = client.post(url, {"images": [SimpleUploadedFile("a.png", png())]})

    assert response.status_code == 403
    assert not Attachment.objects.exists()


def test_a_waiting_image_can_be_removed_and_its_file_goes_too(
    actors: Actors, vision_chat: Conversation, media_root: Path, django_capture_on_commit_callbacks: Any
) -> None:
    attachment = stored(vision_chat, png())
    assert attachment.file.name is not None
    path = media_root / attachment.file.name

    with django_capture_on_commit_callbacks(execute=True):  # the file goes once the delete commits
        response = client_for(actors.teammate).post(reverse("chat:attachment-remove", args=[attachment.pk]))

    assert response.status_code == 200
    assert not Attachment.objects.exists()
    assert not path.exists()


def test_an_outsider_cannot_remove_an_image(actors: Actors, vision_chat: Conversation) -> None:
    attachment = stored(vision_chat, png())

    response = client_for(actors.outsider).post(reverse("chat:attachment-remove", args=[attachment.pk]))

    assert response.status_code == 404
    assert Attachment.objects.filter(pk=attachment.pk).exists()


# --- serving: only to the conversation's team ------------------------------------------------


def test_a_member_gets_the_image_with_its_type_nosniff_and_a_private_cache(
    actors: Actors, vision_chat: Conversation
) -> None:
    attachment = stored(vision_chat, png())

    response = client_for(actors.teammate).get(reverse("chat:attachment", args=[attachment.pk]))

    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "private" in response["Cache-Control"]
    assert "sandbox" in response["Content-Security-Policy"]  # opened on its own, it runs nothing
    assert hashlib.sha256(response.content).hexdigest() == attachment.sha256


def test_a_viewer_of_the_team_can_see_the_image(actors: Actors, vision_chat: Conversation) -> None:
    attachment = stored(vision_chat, png())

    response = client_for(actors.viewer).get(reverse("chat:attachment", args=[attachment.pk]))

    assert response.status_code == 200


def test_an_outsider_gets_a_404_for_another_teams_image(actors: Actors, vision_chat: Conversation) -> None:
    attachment = stored(vision_chat, png())

    response = client_for(actors.outsider).get(reverse("chat:attachment", args=[attachment.pk]))

    assert response.status_code == 404


def test_an_anonymous_visitor_is_sent_to_the_login(vision_chat: Conversation) -> None:
    attachment = stored(vision_chat, png())

    response = Client().get(reverse("chat:attachment", args=[attachment.pk]))

    assert response.status_code == 302 and "/login/" in response["Location"]


def test_there_is_no_public_media_url(settings: Any) -> None:
    assert not settings.MEDIA_URL or settings.MEDIA_URL == "/"  # Django's default: nothing served
    from django.urls import get_resolver

    patterns = [str(pattern.pattern) for pattern in get_resolver().url_patterns]
    assert not any("media" in pattern for pattern in patterns)


# --- the capability gate ----------------------------------------------------------------------


def test_uploading_to_a_text_only_model_is_refused_with_the_reason(
    actors: Actors, engine_chat: Conversation
) -> None:
    html = upload(client_for(actors.owner), engine_chat, ("a.png", png()))

    assert TEXT_ONLY in html
    assert not Attachment.objects.exists()


def test_sending_images_to_a_text_only_model_is_refused_with_the_same_reason(
    actors: Actors, engine_chat: Conversation
) -> None:
    attachment = stored(engine_chat, png())  # e.g. left over from before the gate

    with pytest.raises(ValidationError, match=re.escape(TEXT_ONLY)):
        chat_turn_start(
            user=actors.owner,
            conversation_id=engine_chat.pk,
            text="What is this?",
            attachment_ids=[attachment.pk],
        )
    assert not Message.objects.exists()
    attachment.refresh_from_db()
    assert attachment.message is None


def test_the_page_disables_the_attach_button_with_the_reason_for_a_text_only_model(
    actors: Actors, engine_chat: Conversation
) -> None:
    html = (
        client_for(actors.owner)
        .get(reverse("chat:conversation-detail", args=[engine_chat.pk]))
        .content.decode()
    )

    assert TEXT_ONLY in html
    button = html[html.index('id="attach-button"') - 80 : html.index('id="attach-button"') + 200]
    assert "disabled" in button


# --- sending ------------------------------------------------------------------------------------


def test_a_turn_takes_its_images_and_sends_them_as_data_url_parts(
    actors: Actors, vision_chat: Conversation
) -> None:
    first, second = stored(vision_chat, png()), stored(vision_chat, jpeg_with_gps())

    turn = chat_turn_start(
        user=actors.owner,
        conversation_id=vision_chat.pk,
        text="Compare these",
        attachment_ids=[first.pk, second.pk],
    )

    content = turn.call.request.messages[-1]["content"]
    assert content[0] == {"type": "text", "text": "Compare these"}
    urls = [part["image_url"]["url"] for part in content[1:]]
    assert urls[0].startswith("data:image/png;base64,") and urls[1].startswith("data:image/jpeg;base64,")
    assert hashlib.sha256(base64.b64decode(urls[1].split(",", 1)[1])).hexdigest() == second.sha256
    assert set(turn.user_message.attachments.all()) == {first, second}
    # The estimate counts the text and a fixed figure per image, never the base64.
    assert turn.call.request.prompt_chars == len("Compare these") + 2 * IMAGE_PROMPT_CHARS


def test_an_image_only_turn_is_allowed_and_titles_the_conversation(
    actors: Actors, vision_chat: Conversation
) -> None:
    attachment = stored(vision_chat, png())

    turn = chat_turn_start(
        user=actors.owner, conversation_id=vision_chat.pk, text="  ", attachment_ids=[attachment.pk]
    )

    assert turn.user_message.content == ""
    assert [part["type"] for part in turn.call.request.messages[-1]["content"]] == ["image_url"]
    vision_chat.refresh_from_db()
    assert vision_chat.title == "1 image"


def test_history_images_are_sent_again_with_later_turns(actors: Actors, vision_chat: Conversation) -> None:
    attachment = stored(vision_chat, png())
    chat_turn_start(
        user=actors.owner, conversation_id=vision_chat.pk, text="Look", attachment_ids=[attachment.pk]
    )
    message_append(conversation=vision_chat, role=MessageRole.ASSISTANT, content="A red square.")

    history = upstream_messages(vision_chat)

    look = next(message for message in history if message["role"] == "user")
    assert [part["type"] for part in look["content"]] == ["text", "image_url"]


def test_an_image_already_sent_or_from_another_conversation_is_refused(
    actors: Actors, vision_chat: Conversation, workers_connection: ProviderConnection
) -> None:
    sent = stored(vision_chat, png())
    chat_turn_start(user=actors.owner, conversation_id=vision_chat.pk, text="one", attachment_ids=[sent.pk])
    elsewhere = conversation_create(user=actors.owner, connection_id=workers_connection.pk, model_id=SCOUT)
    foreign = stored(elsewhere, png())

    for ids in ([sent.pk], [foreign.pk]):
        with pytest.raises(
            ValidationError, match="already sent, removed, or belongs to another conversation"
        ):
            chat_turn_start(user=actors.owner, conversation_id=vision_chat.pk, text="two", attachment_ids=ids)
    assert Message.objects.filter(conversation=vision_chat).count() == 1
    foreign.refresh_from_db()
    assert foreign.message is None


def test_an_outsider_cannot_send_another_teams_image_in_their_own_conversation(
    actors: Actors, vision_chat: Conversation, other_connection: ProviderConnection
) -> None:
    theirs = conversation_create(user=actors.outsider, connection_id=other_connection.pk, model_id=SCOUT)
    attachment = stored(vision_chat, png())

    with pytest.raises(ValidationError, match="belongs to another conversation"):
        chat_turn_start(
            user=actors.outsider, conversation_id=theirs.pk, text="mine now", attachment_ids=[attachment.pk]
        )


def test_the_conversation_page_shows_sent_images_through_the_view(
    actors: Actors, vision_chat: Conversation
) -> None:
    attachment = stored(vision_chat, png())
    chat_turn_start(
        user=actors.owner, conversation_id=vision_chat.pk, text="Look", attachment_ids=[attachment.pk]
    )
    waiting = stored(vision_chat, png(10, 10))

    html = (
        client_for(actors.teammate)
        .get(reverse("chat:conversation-detail", args=[vision_chat.pk]))
        .content.decode()
    )

    messages_part, composer_part = html.split('id="composer"', 1)
    assert f'src="{reverse("chat:attachment", args=[attachment.pk])}"' in messages_part
    assert f'name="attachment" value="{waiting.pk}"' in composer_part  # still waiting after a reload


# --- the socket command -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "ids"),
    [(None, ()), ("", ()), ("12", (12,)), (["12", "13", "12"], (12, 13)), ([7], (7,))],
)
def test_the_send_command_carries_attachment_ids(value: object, ids: tuple[int, ...]) -> None:
    import json

    command = chat_command_parse(json.dumps({"action": "send", "message": "hi", "attachment": value}))

    assert command == SendCommand(text="hi", attachment_ids=ids)


@pytest.mark.parametrize("value", ["twelve", ["1", {"a": 1}], [True], ["-3"], [str(n) for n in range(9)]])
def test_a_bad_attachment_id_refuses_the_command(value: object) -> None:
    import json

    with pytest.raises(BadCommand):
        chat_command_parse(json.dumps({"action": "send", "message": "hi", "attachment": value}))


def test_clean_image_is_what_is_stored(vision_chat: Conversation) -> None:
    image = CleanImage(data=png(), content_type="image/png", extension="png", width=32, height=24)

    attachment = attachment_store(conversation=vision_chat, image=image)

    assert attachment.sha256 == hashlib.sha256(image.data).hexdigest()
    name = attachment.file.name
    assert name is not None and name.startswith("attachments/") and name.endswith(".png")
