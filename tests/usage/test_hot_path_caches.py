"""What admission keeps in the process (price cards, ledger ids) never prices or holds with
something this process changed or deleted."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from playground.catalog.models import CatalogModel, PriceCard
from playground.usage.budgets import budget_reserve
from playground.usage.calls.budget import HoldAtAdmission, calls_hold_together
from playground.usage.models import BudgetLedger
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.usage.test_budgets import call, priced, priced_model, set_budget

__all__ = ["priced_model"]  # the fixture, used by name


@pytest.mark.django_db
def test_a_price_override_saved_in_this_process_prices_the_next_request(
    actors: Actors, priced_model: CatalogModel
) -> None:
    listed = priced(actors)
    assert listed.card is not None and listed.card.team_id is None
    assert priced(actors) == listed  # kept

    override = PriceCard.objects.create(
        model=priced_model,
        team=actors.team,
        effective_from=dt.date(2026, 1, 1),
        label="Our negotiated price",
        input_per_m=Decimal(0),
        output_per_m=Decimal(500),
    )

    assert priced(actors).card == override
    override.delete()
    assert priced(actors).card == listed.card


@pytest.mark.django_db
def test_a_deleted_ledger_is_made_again_not_held_by_its_remembered_id(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    set_budget(actors, "5")
    first = call(actors, fake_upstream, budget=HoldAtAdmission())
    calls_hold_together([first])
    assert first.reservation is not None
    BudgetLedger.objects.filter(team=actors.team).delete()  # e.g. with a test's or a team's cleanup

    reservation = budget_reserve(
        team_id=actors.team.pk, user_id=actors.teammate.pk, amount=Decimal(1), card=priced(actors)
    )

    assert reservation.amount == Decimal(1)
    ledger = BudgetLedger.objects.get(team=actors.team, user__isnull=True, month__lte=timezone.now().date())
    assert ledger.reserved_usd == Decimal(1)
