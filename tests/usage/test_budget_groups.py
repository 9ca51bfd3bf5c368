"""Requests admitted together (`budget_reserve_for_requests`, the gateway's groups): each one
reserved or refused exactly as if it had come alone, in order, with the statements of one
admission when the budgets cover the whole group."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from playground.catalog.models import CatalogModel
from playground.providers.adapters import ChatRequest
from playground.usage.api_keys import api_key_issue
from playground.usage.budgets import (
    BudgetExceeded,
    BudgetRequest,
    KeyBudget,
    Reservation,
    UnpricedRefused,
    budget_reserve_for_requests,
)
from playground.usage.models import BudgetLedger, BudgetReservation
from playground.usage.records import price_card_known
from tests.support.actors import Actors
from tests.usage.test_budgets import MODEL, priced, priced_model, set_budget

__all__ = ["priced_model"]  # the fixture, used by name

pytestmark = pytest.mark.django_db


def request(
    actors: Actors, *, max_tokens: int = 1000, model: str = MODEL, key: KeyBudget | None = None
) -> BudgetRequest:
    """A request whose worst case is $1 per 1,000 max tokens (the test card)."""
    chat = ChatRequest(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=max_tokens)
    card = (
        priced(actors)
        if model == MODEL
        else price_card_known(model_id=model, day=priced(actors).day, team_id=actors.team.pk)
    )
    return BudgetRequest(
        request=chat, team_id=actors.team.pk, user_id=actors.owner.pk, card=card, label="gateway", key=key
    )


def team_reserved(actors: Actors) -> Decimal:
    return BudgetLedger.objects.get(team=actors.team, user__isnull=True, api_key__isnull=True).reserved_usd


def test_a_group_the_budget_covers_is_held_once_per_ledger(
    actors: Actors, priced_model: CatalogModel
) -> None:
    set_budget(actors, "10")
    budget_reserve_for_requests([request(actors)])  # the ledgers exist; their ids are known
    with CaptureQueriesContext(connection) as alone:
        budget_reserve_for_requests([request(actors)])
    with CaptureQueriesContext(connection) as grouped:
        results = budget_reserve_for_requests([request(actors) for _ in range(5)])
    assert all(isinstance(result, Reservation) and result.amount == Decimal(1) for result in results)
    assert len({result.id for result in results if isinstance(result, Reservation)}) == 5
    assert team_reserved(actors) == Decimal(7)
    assert BudgetReservation.objects.filter(settled_at__isnull=True).count() == 7
    assert len(grouped.captured_queries) == len(
        alone.captured_queries
    )  # five requests, one admission's statements


def test_a_group_the_budget_does_not_cover_is_admitted_in_order_as_if_one_by_one(
    actors: Actors, priced_model: CatalogModel
) -> None:
    set_budget(actors, "3.50")
    results = budget_reserve_for_requests([request(actors) for _ in range(5)])
    assert [type(result) for result in results] == [Reservation] * 3 + [BudgetExceeded] * 2
    assert "could cost up to $1.00; $0.50 of the team's $3.50 budget remains" in str(results[3])
    assert team_reserved(actors) == Decimal(3)
    # a smaller request after the refused ones still fits, as it would alone
    *_, small = budget_reserve_for_requests([request(actors), request(actors, max_tokens=400)])
    assert isinstance(small, Reservation) and team_reserved(actors) == Decimal("3.4")


def test_an_unpriced_request_in_a_group_is_refused_alone(actors: Actors, priced_model: CatalogModel) -> None:
    set_budget(actors, "10")
    results = budget_reserve_for_requests(
        [request(actors), request(actors, model="@cf/test/unpriced"), request(actors)]
    )
    assert [type(result) for result in results] == [Reservation, UnpricedRefused, Reservation]
    assert team_reserved(actors) == Decimal(2)


def test_a_keys_own_budget_is_held_for_the_group(actors: Actors, priced_model: CatalogModel) -> None:
    set_budget(actors, "100")
    key, _ = api_key_issue(
        team_id=actors.team.pk, name="ci", connection_id=None, created_by_id=actors.owner.pk
    )
    budget = KeyBudget(id=key.pk, name="ci", limit=Decimal(2))
    results = budget_reserve_for_requests([request(actors, key=budget) for _ in range(3)])
    assert [type(result) for result in results] == [Reservation, Reservation, BudgetExceeded]
    assert "the API key 'ci''s" in str(results[2])
    assert BudgetLedger.objects.get(api_key=key).reserved_usd == Decimal(2)
