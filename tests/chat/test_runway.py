"""The conversation's runway under the composer: turns left before the model's context window and
the next ten turns' cost, warned when few are left, and redrawn as each answer ends."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.urls import reverse

from playground.catalog.models import PriceCard
from playground.catalog.seed import KIMI_K26
from playground.chat.models import Conversation
from playground.usage.insights.runway_selectors import conversation_runway
from playground.usage.models import UsageRecord, UsageStatus
from playground.usage.money import money
from tests.fakes.upstream import FakeUpstream, native_frame, sse, usage
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.sockets import Socket

OpenSocket = Callable[[str | None, int], Socket]


def kimi_card() -> PriceCard:
    return PriceCard.objects.filter(model__model_id=KIMI_K26, team__isnull=True).latest("effective_from")


def turns(conversation: Conversation, *prompts: tuple[int, int | None]) -> None:
    card = kimi_card()
    for prompt, cached in prompts:
        UsageRecord.objects.create(
            team_id=conversation.team_id,
            model_id=conversation.model_id,
            conversation_id=conversation.pk,
            status=UsageStatus.OK,
            prompt_tokens=prompt,
            cached_tokens=cached,
            completion_tokens=100,
            price_card=card,
        )


@pytest.mark.django_db
def test_the_composer_shows_the_turns_left_and_the_next_ten_turns_cost(
    actors: Actors, conversation: Conversation, other_conversation: Conversation
) -> None:
    turns(conversation, (1000, 0), (2000, 1000), (3000, 2000))
    turns(other_conversation, (200_000, 0))  # another team's: not this runway

    html = (
        client_for(actors.owner)
        .get(reverse("chat:conversation-detail", args=[conversation.pk]))
        .content.decode()
    )

    runway = conversation_runway(team_id=conversation.team_id, conversation_id=conversation.pk)
    assert runway is not None and runway.next_turns_cost is not None
    assert runway.turns_left == (262_144 - 100 - 3000) // 1000
    assert '<p id="runway" class="runway">' in html
    assert f"≈ {runway.turns_left} turns left before the 256k context window" in html
    assert f"next 10 turns ≈ {money(runway.next_turns_cost)} at 50 % cached" in html  # 3,000 of 6,000
    assert "runway-advice" not in html


@pytest.mark.django_db
def test_the_composer_warns_when_fewer_than_ten_turns_are_left(
    actors: Actors, conversation: Conversation
) -> None:
    turns(conversation, (250_000, 240_000), (252_000, 250_000))

    html = (
        client_for(actors.owner)
        .get(reverse("chat:conversation-detail", args=[conversation.pk]))
        .content.decode()
    )

    assert '<p id="runway" class="runway is-few" role="status">' in html
    assert "≈ 5 turns left before the 256k context window" in html  # (262,144 - 100 - 252,000) // 2,000
    assert "next 5 turns ≈" in html
    assert "Start a new conversation soon" in html


@pytest.mark.django_db
def test_no_runway_before_two_answered_turns(actors: Actors, conversation: Conversation) -> None:
    turns(conversation, (1000, 0))

    html = (
        client_for(actors.owner)
        .get(reverse("chat:conversation-detail", args=[conversation.pk]))
        .content.decode()
    )

    assert '<p id="runway" class="runway"></p>' in html


@pytest.mark.django_db(transaction=True)
async def test_the_runway_is_redrawn_as_an_answer_ends(
    open_socket: OpenSocket, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    card = await PriceCard.objects.filter(model__model_id=KIMI_K26, team__isnull=True).alatest(
        "effective_from"
    )
    for prompt in (1000, 2000):
        await UsageRecord.objects.acreate(
            team_id=conversation.team_id,
            model_id=KIMI_K26,
            conversation_id=conversation.pk,
            status=UsageStatus.OK,
            prompt_tokens=prompt,
            cached_tokens=prompt // 2,
            completion_tokens=100,
            price_card=card,
        )
    fake_upstream.script(sse([native_frame("Sure."), native_frame("", usage=usage(3500, 56, cached=2000))]))

    frames = await open_socket("owner", conversation.pk).exchange("And then?")

    finished = frames[-1]
    assert '<p id="runway" class="runway" hx-swap-oob="true">' in finished
    # growth: the median of +1,000 and +1,500; a typical answer: 100 tokens (of 100, 100, 56)
    assert f"≈ {(262_144 - 100 - 3500) // 1250} turns left before the 256k context window" in finished


@pytest.mark.django_db(transaction=True)
async def test_the_answer_is_stored_and_shown_even_if_its_notes_fail(
    open_socket: OpenSocket,
    conversation: Conversation,
    fake_upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The cache break and the runway are extras: a failure there loses no answer."""

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("selector down")

    monkeypatch.setattr("playground.chat.sockets.chat.record_break", broken)
    fake_upstream.script(sse([native_frame("Sure."), native_frame("", usage=usage(300, 5, cached=0))]))

    frames = await open_socket("owner", conversation.pk).exchange("And then?")

    assert "Sure." in frames[-1] and "usage-line" in frames[-1]  # the stored answer replaced the stream
    assert "could not work out the cache break and runway" in caplog.text
