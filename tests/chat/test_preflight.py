"""The pre-flight cost of the next turn, checked against the one cost function and the budget's
worst case, with the card that would price it and the context-window warning."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from playground.accounts.models import Membership
from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26
from playground.chat.domain.attachments import attachments_link, image_refusal
from playground.chat.models import Conversation, MessageRole
from playground.chat.services.conversations import conversation_create
from playground.chat.services.preflight import preflight_for
from playground.chat.services.turns import turn_request_build
from playground.chat.services.uploads import attachment_upload
from playground.providers.images import IMAGE_PROMPT_CHARS
from playground.providers.models import ProviderConnection
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.budgets import BudgetExceeded, budget_month, budget_reserve
from playground.usage.budgets.worst_case import request_worst_case_cost
from playground.usage.metering import estimate_tokens
from playground.usage.models import BudgetLedger, TeamBudget, UsageRecord, UsageStatus
from playground.usage.money import money
from playground.usage.pricing import cost_for
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.images import png
from tests.support.messages import message_append

pytestmark = pytest.mark.django_db

DRAFT = "Summarise the plan in three bullet points, please." * 4


def turn_record(
    conversation: Conversation, *, prompt: int, cached: int | None, completion: int, status: str
) -> UsageRecord:
    return UsageRecord.objects.create(
        team_id=conversation.team_id,
        model_id=conversation.model_id,
        conversation_id=conversation.pk,
        status=status,
        prompt_tokens=prompt,
        cached_tokens=cached,
        completion_tokens=completion,
    )


def kimi_card(day: dt.date) -> PriceCard:
    return PriceCard.objects.filter(
        model__model_id=KIMI_K26, team__isnull=True, effective_from__lte=day
    ).latest("effective_from")


def test_at_most_and_expected_are_the_cost_function_of_the_estimates(
    actors: Actors, conversation: Conversation, other_conversation: Conversation
) -> None:
    conversation.parameters = {"max_tokens": 300}
    conversation.save()
    turn_record(conversation, prompt=1000, cached=600, completion=80, status=UsageStatus.OK)
    turn_record(conversation, prompt=3000, cached=2000, completion=120, status=UsageStatus.OK)
    turn_record(
        conversation, prompt=500, cached=None, completion=0, status=UsageStatus.UPSTREAM_ERROR
    )  # not counted
    turn_record(
        other_conversation, prompt=9000, cached=0, completion=900, status=UsageStatus.OK
    )  # not this one

    preflight = preflight_for(conversation=conversation, sender_id=actors.owner.pk, text=DRAFT)

    request = turn_request_build(conversation=conversation, text=DRAFT)
    prompt = estimate_tokens(request.prompt_chars)
    card = kimi_card(timezone.now().date())
    at_most = cost_for(usage=NormalizedUsage(prompt_tokens=prompt, completion_tokens=300), card=card).total
    share = Decimal(2600) / Decimal(4000)
    expected_usage = NormalizedUsage(
        prompt_tokens=prompt, completion_tokens=100, cached_tokens=int(prompt * share)
    )
    assert preflight.prompt_tokens == prompt
    assert preflight.at_most.cost == at_most
    assert preflight.at_most.cost == request_worst_case_cost(
        request=request, team_id=conversation.team_id, model_id=KIMI_K26
    )  # what the budget will hold for this turn
    assert preflight.expected.cost == cost_for(usage=expected_usage, card=card).total
    assert preflight.expected.cost is not None and preflight.expected.cost < at_most
    assert (preflight.cache_percent, preflight.expected.output_tokens, preflight.so_far.turns) == (65, 100, 2)


def test_a_first_turn_is_expected_from_the_teams_recent_turns_on_the_model_and_says_so(
    actors: Actors,
    conversation: Conversation,
    other_conversation: Conversation,
    workers_connection: ProviderConnection,
) -> None:
    """Not "at most": the team's chat turns on this model this week stand in, and the line says
    whose figures they are. Another team's turns, another model's, and old ones do not count."""
    fresh = conversation_create(user=actors.owner, connection_id=workers_connection.pk, model_id=KIMI_K26)
    url = reverse("chat:preflight", args=[fresh.pk])
    assert preflight_for(conversation=fresh, sender_id=actors.owner.pk, text=DRAFT).basis == "nothing"

    turn_record(conversation, prompt=1000, cached=800, completion=40, status=UsageStatus.OK)
    turn_record(conversation, prompt=3000, cached=2200, completion=80, status=UsageStatus.OK)
    turn_record(other_conversation, prompt=5000, cached=0, completion=900, status=UsageStatus.OK)  # Bravo's
    old = turn_record(conversation, prompt=9000, cached=0, completion=900, status=UsageStatus.OK)
    UsageRecord.objects.filter(pk=old.pk).update(created_at=timezone.now() - dt.timedelta(days=8))
    UsageRecord.objects.create(
        team_id=actors.team.pk,
        model_id="@cf/other/model",
        status=UsageStatus.OK,
        prompt_tokens=10,
        completion_tokens=5,
    )

    preflight = preflight_for(conversation=fresh, sender_id=actors.owner.pk, text=DRAFT)

    assert (preflight.basis, preflight.so_far.turns, preflight.cache_percent) == ("team", 2, 75)
    assert preflight.expected.output_tokens == 60
    assert preflight.expected.cost is not None and preflight.at_most.cost is not None
    assert preflight.expected.cost < preflight.at_most.cost
    html = client_for(actors.owner).post(url, {"message": DRAFT}).content.decode()
    assert "75% cached, ~60 out in the team's 2 recent turns" in html
    assert "(this conversation has no answered turn yet)" in html


def test_a_budget_that_no_longer_covers_the_worst_case_says_send_will_be_refused_before_it_is(
    actors: Actors, conversation: Conversation
) -> None:
    """The team's budget first, then the member's own (tighter) one; the message is the one the
    admission gives when Send is pressed anyway."""
    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal(1))
    month = budget_month(actors.team)
    BudgetLedger.objects.create(team=actors.team, month=month, spent_usd=Decimal("0.25"))
    client = client_for(actors.teammate)
    url = reverse("chat:preflight", args=[conversation.pk])

    assert "Send will be refused" not in client.post(url, {"message": DRAFT}).content.decode()

    BudgetLedger.objects.filter(team=actors.team).update(spent_usd=Decimal(1))
    preflight = preflight_for(conversation=conversation, sender_id=actors.teammate.pk, text=DRAFT)
    worst = money(preflight.at_most.cost or 0)
    assert preflight.budget_refusal == (
        f"This request could cost up to {worst}; $0.00 of the team's $1.00 budget remains this month."
    )
    html = client.post(url, {"message": DRAFT}).content.decode()
    assert 'id="preflight-budget"' in html and "Send will be refused: This request could cost up to" in html

    # Room on the team's budget, none on the member's own limit: theirs is named.
    BudgetLedger.objects.filter(team=actors.team).update(spent_usd=Decimal(0))
    Membership.objects.filter(team=actors.team, user=actors.teammate).update(
        monthly_budget_usd=Decimal("0.00001")
    )
    refusal = preflight_for(
        conversation=conversation, sender_id=actors.teammate.pk, text=DRAFT
    ).budget_refusal
    assert refusal is not None and "of your $0.00 budget remains" in refusal
    owner = preflight_for(conversation=conversation, sender_id=actors.owner.pk, text=DRAFT)
    assert owner.budget_refusal is None  # the owner has no limit of their own

    # What the admission answers when Send is pressed: the same words.
    with pytest.raises(BudgetExceeded) as refused:
        budget_reserve(
            team_id=actors.team.pk,
            user_id=actors.teammate.pk,
            amount=preflight.at_most.cost or Decimal(0),
            card=preflight.at_most.card,
        )
    assert str(refused.value) == refusal


def test_the_line_names_the_teams_override_and_its_effective_date(
    actors: Actors, conversation: Conversation
) -> None:
    today = timezone.now().date()
    PriceCard.objects.create(
        model=CatalogModel.objects.get(model_id=KIMI_K26),
        team=actors.team,
        effective_from=today - dt.timedelta(days=3),
        input_per_m=Decimal("0.50"),
        cached_input_per_m=Decimal("0.05"),
        output_per_m=Decimal("2.00"),
        label="Alpha's negotiated rate",
    )

    response = client_for(actors.teammate).post(
        reverse("chat:preflight", args=[conversation.pk]), {"message": DRAFT}
    )

    html = response.content.decode()
    preflight = preflight_for(conversation=conversation, sender_id=actors.owner.pk, text=DRAFT)
    assert preflight.at_most.card.card is not None and preflight.at_most.card.card.team_id == actors.team.pk
    assert f"at most {money(preflight.at_most.cost or 0)}" in html
    assert f"expected {money(preflight.expected.cost or 0)}" in html
    assert "Alpha&#x27;s negotiated rate" in html and "Alpha's override" in html
    assert f"effective {today - dt.timedelta(days=3):%Y-%m-%d}" in html
    assert "no answered turn yet" in html  # nothing to expect a cached share from


def test_an_image_the_model_cannot_read_is_said_instead_of_a_cost(
    actors: Actors, engine_connection: ProviderConnection
) -> None:
    conversation = conversation_create(
        user=actors.owner, connection_id=engine_connection.pk, model_id=ENGINE_MODEL_ID
    )

    response = client_for(actors.owner).post(
        reverse("chat:preflight", args=[conversation.pk]), {"message": "hi", "attachment": ["1"]}
    )

    refusal = image_refusal(model_id=ENGINE_MODEL_ID)
    assert refusal and escape(refusal) in response.content.decode()
    assert 'id="preflight-at-most"' not in response.content.decode()


@pytest.mark.parametrize(
    ("history_chars", "warning"),
    [
        (20_000, ""),  # ~5,000 of 8,192 tokens: no warning
        (27_000, "few turns are left"),  # ~6,750: over 80 %
        (33_000, "Send would be refused"),  # over the window
    ],
)
def test_the_composer_warns_when_the_prompt_nears_the_context_window(
    actors: Actors, engine_connection: ProviderConnection, history_chars: int, warning: str
) -> None:
    conversation = conversation_create(
        user=actors.owner, connection_id=engine_connection.pk, model_id=ENGINE_MODEL_ID
    )
    message_append(conversation=conversation, role=MessageRole.USER, content="x" * (history_chars // 2))
    message_append(conversation=conversation, role=MessageRole.ASSISTANT, content="y" * (history_chars // 2))

    response = client_for(actors.owner).post(
        reverse("chat:preflight", args=[conversation.pk]), {"message": "z"}
    )

    html = response.content.decode()
    if warning:
        assert warning in html and 'id="preflight-window"' in html
    else:
        assert 'id="preflight-window"' not in html


def test_images_count_as_the_send_counts_them_without_reading_their_files(
    actors: Actors, conversation: Conversation
) -> None:
    sent = attachment_upload(
        user=actors.owner, conversation_id=conversation.pk, uploads=[SimpleUploadedFile("a.png", png())]
    )
    first = message_append(conversation=conversation, role=MessageRole.USER, content="Look")
    attachments_link(message=first, attachments=sent.accepted)
    message_append(conversation=conversation, role=MessageRole.ASSISTANT, content="A red square.")
    draft = attachment_upload(
        user=actors.owner, conversation_id=conversation.pk, uploads=[SimpleUploadedFile("b.png", png(64, 64))]
    )
    ids = [attachment.pk for attachment in draft.accepted]

    preflight = preflight_for(
        conversation=conversation, sender_id=actors.owner.pk, text="And this one?", attachment_ids=ids
    )

    request = turn_request_build(conversation=conversation, text="And this one?", attachments=draft.accepted)
    assert preflight.prompt_tokens == estimate_tokens(request.prompt_chars)
    assert estimate_tokens(request.prompt_chars) > 2 * estimate_tokens(
        IMAGE_PROMPT_CHARS
    )  # both images counted
