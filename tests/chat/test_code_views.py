"""The "View code" and pre-flight views: what they show, and that another team's conversation
or answer is a 404 in each of them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from playground.chat.models import Conversation, Message, MessageRole
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord, UsageStatus
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.connections import WORKERS_TOKEN
from tests.support.messages import message_append

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def answered(conversation: Conversation) -> Message:
    """An answer with the usage record of its request (the body it sent kept on the record)."""
    record = UsageRecord.objects.create(
        team_id=conversation.team_id,
        connection=conversation.connection,
        model_id=conversation.model_id,
        conversation_id=conversation.pk,
        status=UsageStatus.OK,
        affinity_key=conversation.affinity_key,
        request_body={"messages": [{"role": "user", "content": "Hi"}], "stream": True},
    )
    message_append(conversation=conversation, role=MessageRole.USER, content="Hi")
    return message_append(
        conversation=conversation, role=MessageRole.ASSISTANT, content="Hello", usage_record=record
    )


def test_the_next_requests_code_shows_the_draft_the_affinity_key_and_no_token(
    actors: Actors, conversation: Conversation
) -> None:
    url = reverse("chat:next-request-code", args=[conversation.pk])
    response = client_for(actors.teammate).post(
        url, {"message": "Draft text", "target": "direct"}, headers=HTMX
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert "Draft text" in html
    assert f"x-session-affinity: {conversation.affinity_key}" in html
    assert "$CLOUDFLARE_API_TOKEN" in html and WORKERS_TOKEN not in html
    assert 'data-copy="next-code-curl"' in html and 'data-copy="next-code-python-openai"' in html
    assert "<html" not in html  # the panel alone for htmx


def test_the_gateway_target_is_chosen_by_a_link_that_works_without_javascript(
    actors: Actors, conversation: Conversation
) -> None:
    url = reverse("chat:next-request-code", args=[conversation.pk])
    response = client_for(actors.viewer).get(url, {"target": "gateway"})

    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    assert "http://testserver/v1/chat/completions" in html and "$PLAYGROUND_API_KEY" in html
    assert "(your next message)" in html


def test_a_past_requests_code_is_shown_under_its_answer(actors: Actors, conversation: Conversation) -> None:
    answer = answered(conversation)
    page = client_for(actors.teammate).get(reverse("chat:conversation-detail", args=[conversation.pk]))
    url = reverse("chat:message-code", args=[conversation.pk, answer.pk])
    assert url in page.content.decode()

    response = client_for(actors.teammate).get(url, headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200 and 'id="code-' in html
    assert "&quot;content&quot;: &quot;Hi&quot;" in html


def test_another_teams_conversation_and_answer_are_a_404_in_every_new_view(
    actors: Actors, conversation: Conversation, other_conversation: Conversation
) -> None:
    answer = answered(other_conversation)
    outsider, teammate = client_for(actors.outsider), client_for(actors.teammate)
    mine = answered(conversation)
    urls = [
        ("get", reverse("chat:next-request-code", args=[other_conversation.pk])),
        ("post", reverse("chat:next-request-code", args=[other_conversation.pk])),
        ("get", reverse("chat:message-code", args=[other_conversation.pk, answer.pk])),
        ("post", reverse("chat:preflight", args=[other_conversation.pk])),
        # an answer of the other team's, asked for under one of ours
        ("get", reverse("chat:message-code", args=[conversation.pk, answer.pk])),
    ]
    for method, url in urls:
        assert getattr(teammate, method)(url, headers=HTMX).status_code == 404, url
    assert outsider.get(reverse("chat:message-code", args=[conversation.pk, mine.pk])).status_code == 404
    assert outsider.post(reverse("chat:preflight", args=[conversation.pk])).status_code == 404
    assert client_for(None).post(reverse("chat:preflight", args=[conversation.pk])).status_code == 302


def test_a_deleted_connection_says_there_is_nothing_to_send_to(
    actors: Actors, conversation: Conversation, workers_connection: ProviderConnection
) -> None:
    workers_connection.delete()
    url = reverse("chat:next-request-code", args=[conversation.pk])

    html = client_for(actors.teammate).get(url, headers=HTMX).content.decode()

    assert "connection was deleted" in html
