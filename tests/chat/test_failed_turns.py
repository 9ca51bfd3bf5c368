"""A refused or failed turn is shown as such, kept out of the next request, and can be deleted;
chat turns and tool continuations on a model without a price card are refused under a budget."""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse

from playground.accounts.models import AuditAction, AuditEvent, Membership
from playground.catalog.seed import KIMI_K26
from playground.chat.models import Conversation, Message, MessageRole
from playground.chat.services.tool_continuations import ToolResultInput, chat_continue_start
from playground.chat.services.turns import ChatTurn, chat_turn_start
from playground.providers.models import ProviderConnection
from playground.usage.budgets import BUDGET_EXCEEDED, UNPRICED_REFUSED
from playground.usage.models import TeamBudget, UsageRecord, UsageStatus
from tests.fakes.upstream import FakeUpstream, error
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.messages import message_append

pytestmark = pytest.mark.django_db

UNPRICED = "@cf/typed/no-card"  # an id typed on an OpenAI-compatible endpoint: no price card


def drain(turn: ChatTurn) -> ChatTurn:
    async def run() -> None:
        async for _ in turn.events():
            pass

    async_to_sync(run)()
    return turn


def send(actors: Actors, conversation: Conversation, text: str) -> ChatTurn:
    return drain(chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text=text))


def team_budget(actors: Actors, usd: str) -> None:
    TeamBudget.objects.update_or_create(
        team=actors.team, defaults={"monthly_limit_usd": Decimal(usd), "alert_thresholds": []}
    )


def delete_url(message: Message) -> str:
    return reverse("chat:turn-delete", args=[message.conversation_id, message.pk])


def roles_sent(upstream: FakeUpstream) -> list[str]:
    return [message["role"] for message in upstream.requests[-1].json["messages"]]


@pytest.fixture
def gateway_chat(actors: Actors, openai_connection: ProviderConnection) -> Conversation:
    return Conversation.objects.create(
        team=actors.team, user=actors.owner, connection=openai_connection, model_id=KIMI_K26
    )


@pytest.fixture
def unpriced_chat(actors: Actors, openai_connection: ProviderConnection) -> Conversation:
    return Conversation.objects.create(
        team=actors.team, user=actors.owner, connection=openai_connection, model_id=UNPRICED
    )


# --- history ---------------------------------------------------------------------------------


def test_after_a_budget_refusal_the_next_turn_sends_no_two_user_messages_in_a_row(
    actors: Actors, gateway_chat: Conversation, fake_upstream: FakeUpstream
) -> None:
    send(actors, gateway_chat, "Zero")  # answered: no budget yet
    team_budget(actors, "0.000001")
    refused = send(actors, gateway_chat, "First")
    assert refused.assistant_message is not None and refused.assistant_message.is_failed_answer
    assert len(fake_upstream.requests) == 1, "the refused turn sent nothing"
    team_budget(actors, "100")

    send(actors, gateway_chat, "Second")

    sent = fake_upstream.requests[-1].json["messages"]
    assert roles_sent(fake_upstream) == ["user", "assistant", "user"]
    assert [sent[0]["content"], sent[2]["content"]] == ["Zero", "Second"]
    assert all(a["role"] != "user" or b["role"] != "user" for a, b in itertools.pairwise(sent))


def test_a_turn_the_upstream_failed_is_kept_out_of_the_next_request_too(
    actors: Actors, gateway_chat: Conversation, fake_upstream: FakeUpstream, settings: Any
) -> None:
    settings.UPSTREAM_MAX_RETRIES = 0
    fake_upstream.script(error(400))
    failed = send(actors, gateway_chat, "Broken")
    assert failed.assistant_message is not None
    assert failed.assistant_message.usage_record is not None
    assert failed.assistant_message.usage_record.status == UsageStatus.UPSTREAM_ERROR

    send(actors, gateway_chat, "Again")

    assert fake_upstream.requests[-1].json["messages"] == [{"role": "user", "content": "Again"}]


# --- shown, and deleted ----------------------------------------------------------------------


def test_a_refused_turn_is_shown_as_such_with_a_delete_action(
    actors: Actors, gateway_chat: Conversation, fake_upstream: FakeUpstream
) -> None:
    team_budget(actors, "0.000001")
    send(actors, gateway_chat, "Too dear")

    page = client_for(actors.owner).get(reverse("chat:conversation-detail", args=[gateway_chat.pk]))

    content = page.content.decode()
    assert "Rejected" in content and "remains this month" in content
    assert "left out of what the next message sends" in content and "Delete turn" in content


def test_the_user_deletes_a_failed_turn_and_its_question_and_the_record_stays(
    actors: Actors, gateway_chat: Conversation, fake_upstream: FakeUpstream
) -> None:
    send(actors, gateway_chat, "Kept")
    team_budget(actors, "0.000001")
    refused = send(actors, gateway_chat, "Too dear")
    assert refused.assistant_message is not None

    response = client_for(actors.owner).post(delete_url(refused.assistant_message))

    assert response.status_code == 302
    assert list(gateway_chat.messages.values_list("content", flat=True)) == [
        "Kept",
        fake_upstream.default_text,
    ]
    rejected = UsageRecord.objects.get(status=UsageStatus.REJECTED)
    assert rejected.error_code == BUDGET_EXCEEDED, "the refusal stays in the request log"


def test_a_failed_turn_is_deleted_only_by_its_team_and_an_answered_one_stays(
    actors: Actors, gateway_chat: Conversation, fake_upstream: FakeUpstream
) -> None:
    answered = send(actors, gateway_chat, "Kept").assistant_message
    team_budget(actors, "0.000001")
    refused = send(actors, gateway_chat, "Too dear").assistant_message
    assert answered is not None and refused is not None

    assert client_for(actors.outsider).post(delete_url(refused)).status_code == 404
    assert client_for(actors.viewer).post(delete_url(refused)).status_code == 403
    assert client_for(actors.owner).post(delete_url(answered)).status_code == 400
    assert gateway_chat.messages.count() == 4

    response = client_for(actors.owner).post(delete_url(refused), HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert gateway_chat.messages.count() == 2
    redrawn = response.content.decode()  # the messages, redrawn for htmx to swap in
    assert redrawn.lstrip().startswith('<div class="messages" id="messages"')
    assert "Kept" in redrawn and "Too dear" not in redrawn


# --- unpriced models under a budget ------------------------------------------------------------


def test_a_chat_turn_on_an_unpriced_model_is_refused_under_a_budget_until_an_owner_allows_it(
    actors: Actors, unpriced_chat: Conversation, fake_upstream: FakeUpstream
) -> None:
    team_budget(actors, "100")

    refused = send(actors, unpriced_chat, "Hello")

    assert fake_upstream.requests == []
    record = UsageRecord.objects.get()
    assert (record.status, record.error_code) == (UsageStatus.REJECTED, UNPRICED_REFUSED)
    assert "Set a price on the Catalogue page" in record.error_text
    assert refused.assistant_message is not None and refused.assistant_message.is_failed_answer

    owner = client_for(actors.owner)
    assert (
        owner.post(f"/teams/{actors.team.pk}/budgets/unpriced/", {"allow_unpriced": "on"}).status_code == 302
    )
    assert AuditEvent.objects.filter(
        action=AuditAction.UNPRICED_REQUESTS_CHANGED, actor=actors.owner
    ).exists()
    send(actors, unpriced_chat, "Hello again")

    assert fake_upstream.requests[-1].json["messages"] == [{"role": "user", "content": "Hello again"}]
    sent = UsageRecord.objects.get(status=UsageStatus.OK)
    assert sent.price_card is None and sent.total_cost == 0, "recorded unpriced"


def test_a_tool_continuation_on_an_unpriced_model_is_refused_under_a_budget(
    actors: Actors, unpriced_chat: Conversation, fake_upstream: FakeUpstream
) -> None:
    unpriced_chat.tools = [
        {
            "type": "function",
            "function": {"name": "clock", "parameters": {"type": "object", "properties": {}}},
        }
    ]
    unpriced_chat.save()
    message_append(conversation=unpriced_chat, role=MessageRole.USER, content="Time?")
    calls = [{"index": 0, "id": "c0", "name": "clock", "arguments": "{}", "valid": True, "errors": []}]
    answer = message_append(conversation=unpriced_chat, role=MessageRole.ASSISTANT, tool_calls=calls)
    Membership.objects.filter(team=actors.team, user=actors.owner).update(monthly_budget_usd=Decimal(5))

    turn = drain(
        chat_continue_start(
            user=actors.owner,
            conversation_id=unpriced_chat.pk,
            message_id=answer.pk,
            results={0: ToolResultInput(text="noon")},
        )
    )

    assert fake_upstream.requests == []
    assert turn.assistant_message is not None and turn.assistant_message.usage_record is not None
    record = turn.assistant_message.usage_record
    assert (record.status, record.error_code) == (UsageStatus.REJECTED, UNPRICED_REFUSED)
    assert "so your budget cannot count" in record.error_text
