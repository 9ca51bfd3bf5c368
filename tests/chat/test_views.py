"""Chat pages: who sees what (owner, teammate, viewer, outsider) on every view."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from playground.catalog.models import PriceCard
from playground.catalog.seed import ENGINE_GEMMA_ID, ENGINE_MODEL_ID, KIMI_K26
from playground.chat.models import Conversation, MessageRole
from playground.chat.services.conversations import conversation_create
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord, UsageSource, UsageStatus
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.messages import message_append

pytestmark = pytest.mark.django_db


def detail_url(conversation: Conversation) -> str:
    return reverse("chat:conversation-detail", args=[conversation.pk])


def affinity_url(conversation: Conversation) -> str:
    return reverse("chat:conversation-affinity", args=[conversation.pk])


# --- entry points ---------------------------------------------------------------------------


def test_the_home_page_redirects_to_the_conversation_list(actors: Actors) -> None:
    response = client_for(actors.owner).get("/")
    assert response.status_code == 302
    assert response["Location"] == reverse("chat:conversation-list")


@pytest.mark.parametrize("url", ["/chat/", "/chat/models/?connection=1"])
def test_anonymous_visitors_are_sent_to_the_login_page(url: str) -> None:
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_anonymous_visitors_cannot_open_a_conversation(conversation: Conversation) -> None:
    response = Client().get(detail_url(conversation))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_login_form_logs_the_owner_in_and_lands_on_the_list(actors: Actors) -> None:
    client = Client()
    page = client.get(reverse("login"))
    assert b'name="username"' in page.content

    response = client.post(reverse("login"), {"username": "owner", "password": "password-owner"}, follow=True)

    assert response.redirect_chain[-1][0] == reverse("chat:conversation-list")
    assert b"Log out" in response.content


def test_logging_out_is_a_post_form(actors: Actors) -> None:
    client = client_for(actors.owner)
    page = client.get(reverse("chat:conversation-list"))
    assert f'action="{reverse("logout")}"'.encode() in page.content

    response = client.post(reverse("logout"))

    assert response.status_code == 302
    assert client.get(reverse("chat:conversation-list")).status_code == 302


# --- the list ----------------------------------------------------------------------------------


def test_the_list_shows_an_empty_state_and_the_new_conversation_form(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    response = client_for(actors.owner).get(reverse("chat:conversation-list"))

    content = response.content.decode()
    assert "No conversations yet — start one" in content
    assert "Workers AI (fake)" in content
    assert 'id="model-field"' in content
    assert KIMI_K26 in content
    assert "x-session-affinity" in content
    assert 'hx-headers=\'{"X-CSRFToken"' in content
    assert content.count("htmx-2.0.11.min.js") == 1
    assert "Alpha" in content  # the user's team in the top bar


def test_only_superusers_see_the_link_to_the_admin(actors: Actors) -> None:
    User.objects.filter(pk=actors.owner.pk).update(is_staff=True, is_superuser=True)
    User.objects.filter(pk=actors.teammate.pk).update(is_staff=True)  # staff alone opens no admin
    admin_link = f'href="{reverse("admin:index")}"'

    assert admin_link in client_for(actors.owner).get(reverse("chat:conversation-list")).content.decode()
    assert (
        admin_link not in client_for(actors.teammate).get(reverse("chat:conversation-list")).content.decode()
    )


def test_the_owner_and_a_teammate_see_the_teams_conversations_but_the_outsider_does_not(
    actors: Actors, conversation: Conversation
) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(title="Quarterly numbers")

    assert b"Quarterly numbers" in client_for(actors.owner).get("/chat/").content
    assert b"Quarterly numbers" in client_for(actors.teammate).get("/chat/").content
    outsider_page = client_for(actors.outsider).get("/chat/").content
    assert b"Quarterly numbers" not in outsider_page
    assert b"No conversations yet" in outsider_page


def test_the_new_conversation_form_offers_only_connections_the_user_can_run(
    actors: Actors, workers_connection: ProviderConnection, other_connection: ProviderConnection
) -> None:
    outsider_page = client_for(actors.outsider).get("/chat/").content.decode()
    assert "Bravo Workers AI" in outsider_page
    assert "Workers AI (fake)" not in outsider_page

    viewer_page = client_for(actors.viewer).get("/chat/").content.decode()
    assert "No connection you can use" in viewer_page
    assert "Workers AI (fake)" not in viewer_page


# --- creating ------------------------------------------------------------------------------------


def test_the_owner_starts_a_conversation_and_lands_on_it(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    response = client_for(actors.owner).post(
        reverse("chat:conversation-create"),
        {
            "connection": workers_connection.pk,
            "model_id": KIMI_K26,
            "system_prompt": "Answer in French.",
        },
    )

    conversation = Conversation.objects.get()
    assert response.status_code == 302
    assert response["Location"] == detail_url(conversation)
    assert conversation.team == actors.team
    assert conversation.model_id == KIMI_K26
    assert conversation.system_prompt == "Answer in French."
    assert conversation.use_affinity is False  # the checkbox was not sent: unticked


def test_a_teammate_starts_a_conversation_with_affinity(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    client_for(actors.teammate).post(
        reverse("chat:conversation-create"),
        {"connection": workers_connection.pk, "model_id": KIMI_K26, "use_affinity": "on"},
    )

    conversation = Conversation.objects.get()
    assert conversation.user == actors.teammate
    assert conversation.use_affinity is True


def test_an_outsider_cannot_start_a_conversation_on_another_teams_connection(
    actors: Actors, workers_connection: ProviderConnection, other_connection: ProviderConnection
) -> None:
    response = client_for(actors.outsider).post(
        reverse("chat:conversation-create"), {"connection": workers_connection.pk, "model_id": KIMI_K26}
    )

    assert response.status_code == 400
    assert b"Select a valid choice" in response.content
    assert not Conversation.objects.exists()


def test_a_viewer_cannot_start_a_conversation(actors: Actors, workers_connection: ProviderConnection) -> None:
    response = client_for(actors.viewer).post(
        reverse("chat:conversation-create"), {"connection": workers_connection.pk, "model_id": KIMI_K26}
    )

    assert response.status_code == 400
    assert not Conversation.objects.exists()


def test_a_model_the_connection_does_not_serve_is_refused(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    response = client_for(actors.owner).post(
        reverse("chat:conversation-create"),
        {"connection": workers_connection.pk, "model_id": ENGINE_MODEL_ID},
    )

    assert response.status_code == 400
    assert b"Choose one of the models this connection serves." in response.content
    assert not Conversation.objects.exists()


@pytest.mark.parametrize("kind", ["openai_connection", "engine_connection"])
def test_gateway_and_engine_connections_take_a_free_text_model_id(
    actors: Actors, request: pytest.FixtureRequest, kind: str
) -> None:
    connection: ProviderConnection = request.getfixturevalue(kind)
    client_for(actors.owner).post(
        reverse("chat:conversation-create"),
        {"connection": connection.pk, "model_id": KIMI_K26, "custom_model_id": " my-finetune-v2 "},
    )

    assert Conversation.objects.get().model_id == "my-finetune-v2"


@pytest.mark.parametrize("model_id", ["../../healthz", "@local/smollm2?queueRequest=true"])
def test_a_free_text_model_id_that_would_change_the_request_path_is_refused(
    actors: Actors, engine_connection: ProviderConnection, model_id: str
) -> None:
    response = client_for(actors.owner).post(
        reverse("chat:conversation-create"),
        {"connection": engine_connection.pk, "model_id": "", "custom_model_id": model_id},
    )

    assert response.status_code == 400
    assert b"That is not a valid model id." in response.content
    assert not Conversation.objects.exists()
    with pytest.raises(ValidationError):  # the service refuses it too, whoever calls it
        conversation_create(user=actors.owner, connection_id=engine_connection.pk, model_id=model_id)


def test_a_free_text_model_id_is_refused_for_workers_ai(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    response = client_for(actors.owner).post(
        reverse("chat:conversation-create"),
        {"connection": workers_connection.pk, "model_id": KIMI_K26, "custom_model_id": "anything"},
    )

    assert response.status_code == 400
    assert not Conversation.objects.exists()


# --- the model picker fragment -------------------------------------------------------------------


def test_the_model_picker_lists_the_catalogue_for_the_connections_kind(
    actors: Actors, workers_connection: ProviderConnection, engine_connection: ProviderConnection
) -> None:
    client = client_for(actors.owner)

    workers = client.get(
        reverse("chat:model-options"), {"connection": workers_connection.pk}, HTTP_HX_REQUEST="true"
    )
    engine = client.get(
        reverse("chat:model-options"), {"connection": engine_connection.pk}, HTTP_HX_REQUEST="true"
    )

    assert workers.status_code == 200
    assert workers.content.decode().strip().startswith('<div class="field" id="model-field">')
    assert KIMI_K26.encode() in workers.content
    assert ENGINE_MODEL_ID.encode() not in workers.content
    assert b"custom_model_id" not in workers.content
    assert ENGINE_MODEL_ID.encode() in engine.content
    assert KIMI_K26.encode() not in engine.content
    assert b"<html" not in workers.content


def test_the_engine_picker_offers_both_local_models_with_the_default_one_selected(
    actors: Actors, engine_connection: ProviderConnection
) -> None:
    page = client_for(actors.owner).get(
        reverse("chat:model-options"), {"connection": engine_connection.pk}, HTTP_HX_REQUEST="true"
    )

    options = re.findall(r'<option value="([^"]+)"( selected)?>', page.content.decode())
    # Gemma sorts first by name; the engine's default (SmolLM2, instruction-tuned) is the one chosen.
    assert options == [(ENGINE_GEMMA_ID, ""), (ENGINE_MODEL_ID, " selected")]


@pytest.mark.parametrize("kind", ["openai_connection", "engine_connection"])
def test_the_model_picker_offers_free_text_for_gateway_and_engine_connections(
    actors: Actors, request: pytest.FixtureRequest, kind: str
) -> None:
    connection: ProviderConnection = request.getfixturevalue(kind)
    response = client_for(actors.teammate).get(reverse("chat:model-options"), {"connection": connection.pk})

    assert b'name="custom_model_id"' in response.content


def test_the_model_picker_is_a_404_for_another_teams_connection(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    response = client_for(actors.outsider).get(
        reverse("chat:model-options"), {"connection": workers_connection.pk}
    )
    assert response.status_code == 404


def test_the_model_picker_is_a_404_without_a_connection(actors: Actors) -> None:
    response = client_for(actors.owner).get(reverse("chat:model-options"), {"connection": "x"})
    assert response.status_code == 404


# --- the chat page ------------------------------------------------------------------------------------


def test_the_owner_and_a_teammate_can_open_the_chat_page(actors: Actors, conversation: Conversation) -> None:
    for user in (actors.owner, actors.teammate):
        response = client_for(user).get(detail_url(conversation))
        content = response.content.decode()
        assert response.status_code == 200
        assert f'ws-connect="/ws/chat/{conversation.pk}/"' in content
        assert 'hx-ext="ws"' in content
        assert "ws-send" in content
        assert 'name="message"' in content


def test_another_teams_conversation_is_a_404(actors: Actors, conversation: Conversation) -> None:
    response = client_for(actors.outsider).get(detail_url(conversation))
    assert response.status_code == 404


def test_a_viewer_reads_the_conversation_but_the_send_form_is_disabled_with_an_explanation(
    actors: Actors, conversation: Conversation
) -> None:
    message_append(conversation=conversation, role=MessageRole.USER, content="An earlier question")

    response = client_for(actors.viewer).get(detail_url(conversation))

    content = response.content.decode()
    assert response.status_code == 200
    assert "An earlier question" in content
    assert "ws-connect" not in content
    assert 'id="composer"' not in content
    assert "You are a viewer in Alpha" in content
    assert "disabled" in content


def test_stored_answers_show_their_usage_line_and_price_card(
    actors: Actors, conversation: Conversation
) -> None:
    card = PriceCard.objects.get(model__model_id=KIMI_K26)
    record = UsageRecord.objects.create(
        team=actors.team,
        model_id=KIMI_K26,
        conversation_id=conversation.pk,
        status=UsageStatus.OK,
        prompt_tokens=1234,
        cached_tokens=None,
        completion_tokens=56,
        usage_source=UsageSource.ESTIMATED,
        price_card=card,
        price_label=card.label,
        total_cost=Decimal("0.000123"),
        ttft_ms=120,
        latency_ms=1400,
    )
    message_append(conversation=conversation, role=MessageRole.USER, content="<b>hi</b>")
    message_append(
        conversation=conversation,
        role=MessageRole.ASSISTANT,
        content="# Title\n\n<script>x()</script>",
        usage_record=record,
    )

    content = client_for(actors.teammate).get(detail_url(conversation)).content.decode()

    assert "&lt;b&gt;hi&lt;/b&gt;" in content
    assert "<h1>Title</h1>" in content
    assert "<script>x()" not in content
    assert "1,234 in" in content
    assert "— cached" in content  # not reported is not zero
    assert "0 cached" not in content
    assert "$0.000123" in content
    assert "TTFT 120 ms" in content
    assert "1.4 s" in content
    assert "estimated" in content
    assert card.label in content


def test_a_stored_upstream_error_is_shown_in_the_answer(actors: Actors, conversation: Conversation) -> None:
    record = UsageRecord.objects.create(
        team=actors.team,
        model_id=KIMI_K26,
        conversation_id=conversation.pk,
        status=UsageStatus.UPSTREAM_ERROR,
        http_status=503,
        error_text="The upstream answered 503 Service Unavailable.",
        latency_ms=80,
    )
    message_append(conversation=conversation, role=MessageRole.ASSISTANT, content="", usage_record=record)

    content = client_for(actors.owner).get(detail_url(conversation)).content.decode()

    assert 'class="answer-error" role="alert"' in content
    assert "The upstream answered 503 Service Unavailable." in content
    assert "Upstream error · HTTP 503" in content


# --- the affinity toggle ---------------------------------------------------------------------------------


def test_the_owner_switches_affinity_off_and_gets_the_toggle_back(
    actors: Actors, conversation: Conversation
) -> None:
    response = client_for(actors.owner).post(affinity_url(conversation), {}, HTTP_HX_REQUEST="true")

    conversation.refresh_from_db()
    assert response.status_code == 200
    assert conversation.use_affinity is False
    assert response.content.decode().strip().startswith('<form id="affinity"')
    assert b"checked" not in response.content


def test_a_teammate_switches_affinity_back_on(actors: Actors, conversation: Conversation) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(use_affinity=False)

    response = client_for(actors.teammate).post(affinity_url(conversation), {"use_affinity": "on"})

    conversation.refresh_from_db()
    assert response.status_code == 302  # without htmx: back to the page
    assert conversation.use_affinity is True


def test_the_affinity_form_works_without_javascript(actors: Actors, conversation: Conversation) -> None:
    client = Client(enforce_csrf_checks=True)  # as a browser: CSRF is checked
    client.force_login(actors.owner)
    page = client.get(detail_url(conversation)).content.decode()
    form = re.search(r'<form id="affinity".*?</form>', page, re.DOTALL)
    assert form is not None
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.group(0))
    assert token is not None, "the form posts itself without htmx, so it needs its CSRF token"
    assert '<noscript><button type="submit"' in form.group(0)

    response = client.post(affinity_url(conversation), {"csrfmiddlewaretoken": token.group(1)})  # unticked

    conversation.refresh_from_db()
    assert response.status_code == 302
    assert conversation.use_affinity is False


def test_an_outsider_cannot_touch_affinity(actors: Actors, conversation: Conversation) -> None:
    response = client_for(actors.outsider).post(affinity_url(conversation), {}, HTTP_HX_REQUEST="true")

    conversation.refresh_from_db()
    assert response.status_code == 404
    assert conversation.use_affinity is True


def test_a_viewer_cannot_touch_affinity(actors: Actors, conversation: Conversation) -> None:
    response = client_for(actors.viewer).post(affinity_url(conversation), {}, HTTP_HX_REQUEST="true")

    conversation.refresh_from_db()
    assert response.status_code == 403
    assert conversation.use_affinity is True


def test_affinity_only_accepts_post(actors: Actors, conversation: Conversation) -> None:
    assert client_for(actors.owner).get(affinity_url(conversation)).status_code == 405
