"""A model with no price card that day cannot be counted by a budget: while the team or the
member has one, the one reservation step of every path refuses it before anything is sent,
unless an owner allowed unpriced requests for the team."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from playground.accounts.models import Membership
from playground.providers.adapters import ChatRequest
from playground.providers.adapters.openai_compat import OpenAICompatAdapter
from playground.usage.budgets import UNPRICED_REFUSED, UnpricedRefused, budget_reserve
from playground.usage.calls.call import MeteredCall
from playground.usage.calls.context import RequestContext
from playground.usage.models import TeamBudget, UsageStatus
from playground.usage.records import price_card_known
from tests.fakes.upstream import FakeUpstream, Sse, openai_chunk, sse, usage, usage_chunk
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db

UNPRICED = "@cf/typed/no-card"


def call(actors: Actors, upstream: FakeUpstream) -> MeteredCall:
    return MeteredCall(
        adapter=OpenAICompatAdapter(base_url=upstream.url + "/v1", token="t"),
        request=ChatRequest(model=UNPRICED, messages=[{"role": "user", "content": "hi"}], max_tokens=50),
        context=RequestContext(
            team_id=actors.team.pk, user_id=actors.teammate.pk, connection_id=None, model_id=UNPRICED
        ),
    )


def answer() -> Sse:
    return sse([openai_chunk("ok", finish_reason="stop"), usage_chunk(usage(5, 10))])


def test_an_unpriced_request_under_a_team_budget_is_refused_before_it_is_sent_with_the_fix(
    actors: Actors, fake_upstream: FakeUpstream
) -> None:
    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal(100), alert_thresholds=[])

    metered = call(actors, fake_upstream)
    collected = metered.run()

    assert fake_upstream.requests == []
    record = metered.record
    assert record is not None and record.status == UsageStatus.REJECTED
    assert record.error_code == UNPRICED_REFUSED and record.total_cost == 0 and record.price_card is None
    today = timezone.now().date().isoformat()
    assert record.error_text.startswith(
        f"{UNPRICED} has no price card for {today}, so the team's budget cannot count what this request "
        "would cost: nothing was sent. Set a price on the Catalogue page"
    )
    assert "an owner can allow unpriced requests on the Budgets page" in record.error_text
    assert collected.error is not None and collected.error.message == record.error_text


def test_a_members_own_budget_refuses_an_unpriced_request_too(
    actors: Actors, fake_upstream: FakeUpstream
) -> None:
    Membership.objects.filter(team=actors.team, user=actors.teammate).update(monthly_budget_usd=Decimal(5))

    metered = call(actors, fake_upstream)
    metered.run()

    assert fake_upstream.requests == []
    assert metered.record is not None and metered.record.error_code == UNPRICED_REFUSED
    assert "so your budget cannot count" in metered.record.error_text


def test_without_any_budget_an_unpriced_request_is_sent_and_recorded_unpriced(
    actors: Actors, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(answer())

    metered = call(actors, fake_upstream)
    metered.run()

    assert len(fake_upstream.requests) == 1
    assert metered.record is not None and metered.record.status == UsageStatus.OK
    assert metered.record.price_card is None and metered.record.price_label == ""


def test_an_owner_may_allow_unpriced_requests_which_stay_marked_unpriced(
    actors: Actors, fake_upstream: FakeUpstream
) -> None:
    TeamBudget.objects.create(
        team=actors.team, monthly_limit_usd=Decimal(100), alert_thresholds=[], allow_unpriced=True
    )
    fake_upstream.script(answer())

    metered = call(actors, fake_upstream)
    metered.run()

    assert len(fake_upstream.requests) == 1
    assert metered.record is not None and metered.record.status == UsageStatus.OK
    assert metered.record.price_card is None and metered.record.total_cost == 0


def test_every_reservation_is_checked_by_the_card_it_is_given(actors: Actors) -> None:
    """The step a batch submission takes (a sum of worst cases) refuses an unpriced card too."""
    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal(100), alert_thresholds=[])
    unpriced = price_card_known(model_id=UNPRICED, day=dt.date(2026, 11, 2), team_id=actors.team.pk)

    with pytest.raises(UnpricedRefused, match="has no price card for 2026-11-02"):
        budget_reserve(team_id=actors.team.pk, user_id=None, amount=Decimal(0), card=unpriced)
