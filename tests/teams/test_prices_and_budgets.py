"""Price overrides and budgets on the team pages."""

from __future__ import annotations

from decimal import Decimal

from django.utils import timezone

from playground.accounts.models import AuditAction, AuditEvent, Membership
from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import KIMI_K26
from playground.usage.budgets import budget_month, budget_reconcile, budget_reserve
from playground.usage.models import DEFAULT_ALERT_THRESHOLDS, BudgetAlert, TeamBudget
from playground.usage.records import price_card_known
from tests.support.actors import Actors
from tests.support.clients import client_for


def add_override(actors: Actors, **extra: str) -> int:
    model = CatalogModel.objects.get(model_id=KIMI_K26)
    body = {
        "model": model.pk,
        "effective_from": "2026-01-01",
        "input_per_m": "0.50",
        "output_per_m": "2.00",
        "label": "Enterprise deal",
        **extra,
    }
    return client_for(actors.admin).post(f"/teams/{actors.team.pk}/catalogue/overrides/", body).status_code


def test_an_override_is_shown_to_its_team_only_and_prices_its_models_today(actors: Actors) -> None:
    assert add_override(actors) == 302

    alpha = client_for(actors.viewer).get(f"/teams/{actors.team.pk}/catalogue/").content.decode()
    bravo = client_for(actors.outsider).get(f"/teams/{actors.other_team.pk}/catalogue/").content.decode()

    assert "Enterprise deal (team override)" in alpha and "$0.5 in" in alpha
    assert "Enterprise deal" not in bravo
    assert AuditEvent.objects.filter(action=AuditAction.PRICE_OVERRIDE_CREATED, actor=actors.admin).exists()


def test_an_override_may_price_cache_writes_and_the_catalogue_shows_it(actors: Actors) -> None:
    assert add_override(actors, cached_input_per_m="0.05", cache_write_input_per_m="0.625") == 302

    card = PriceCard.objects.get(team=actors.team)
    page = client_for(actors.viewer).get(f"/teams/{actors.team.pk}/catalogue/").content.decode()

    assert card.cache_write_input_per_m == Decimal("0.625")
    assert "$0.5 in · $0.05 cached · $0.625 cache write · $2 out per M tokens" in page
    assert "<td>$0.625</td>" in page  # the price cards table's cache write column
    managed = client_for(actors.admin).get(f"/teams/{actors.team.pk}/catalogue/").content.decode()
    assert 'name="cache_write_input_per_m"' in managed  # the override form asks for it
    event = AuditEvent.objects.get(action=AuditAction.PRICE_OVERRIDE_CREATED)
    assert event.detail["cache_write_input_per_m"] == "0.625"


def test_an_override_without_a_cache_write_price_prices_writes_as_input(actors: Actors) -> None:
    assert add_override(actors) == 302

    card = PriceCard.objects.get(team=actors.team)

    assert card.cache_write_input_per_m is None
    assert card.effective_cache_write_input_per_m == card.input_per_m == Decimal("0.50")


def test_an_override_whose_end_comes_before_its_start_is_refused(actors: Actors) -> None:
    assert add_override(actors, effective_until="2025-12-31") == 400
    assert not PriceCard.objects.filter(team=actors.team).exists()


def test_the_budget_page_shows_spend_reserved_remaining_and_a_forecast(actors: Actors) -> None:
    client_for(actors.owner).post(
        f"/teams/{actors.team.pk}/budgets/",
        {"monthly_limit_usd": "10", "alert_thresholds": "50, 80, 100", "time_zone": "Europe/Paris"},
    )
    card = price_card_known(model_id=KIMI_K26, day=timezone.now().date(), team_id=actors.team.pk)
    spent = budget_reserve(team_id=actors.team.pk, user_id=actors.teammate.pk, amount=Decimal(6), card=card)
    budget_reconcile(reservation=spent, actual=Decimal("5.5"))
    budget_reserve(
        team_id=actors.team.pk, user_id=actors.teammate.pk, amount=Decimal(2), card=card
    )  # in flight

    page = client_for(actors.viewer).get(f"/teams/{actors.team.pk}/budgets/").content.decode()

    assert actors.team.__class__.objects.get(pk=actors.team.pk).time_zone == "Europe/Paris"
    assert 'id="budget-limit">$10.00' in page
    assert 'id="budget-spent">$5.50' in page
    assert 'id="budget-reserved">$2.00' in page
    assert 'id="budget-remaining">$2.50' in page
    assert 'id="budget-forecast"' in page
    assert "has spent $5.50 of its $10.00 budget" in page, "the 50 % banner"
    assert list(BudgetAlert.objects.values_list("threshold", flat=True)) == [50]
    assert AuditEvent.objects.filter(action=AuditAction.BUDGET_CHANGED, actor=actors.owner).exists()


def test_bad_thresholds_and_time_zones_are_refused_and_nothing_is_saved(actors: Actors) -> None:
    response = client_for(actors.owner).post(
        f"/teams/{actors.team.pk}/budgets/",
        {"monthly_limit_usd": "10", "alert_thresholds": "50, lots", "time_zone": "Mars/Olympus"},
    )

    assert response.status_code == 400
    page = response.content.decode()
    assert "not a whole percentage" in page and "not a time zone" in page
    assert not TeamBudget.objects.exists()


def test_a_member_budget_is_set_by_an_admin(actors: Actors) -> None:
    target = actors.membership(actors.teammate)

    client_for(actors.admin).post(
        f"/teams/{actors.team.pk}/budgets/members/{target.pk}/", {"monthly_budget_usd": "3.50"}
    )

    assert Membership.objects.get(pk=target.pk).monthly_budget_usd == Decimal("3.50")
    assert budget_month(actors.team).day == 1


def test_the_catalogue_tells_k25s_retirement_in_the_past_and_prices_the_engine_as_k25_today(
    actors: Actors,
) -> None:
    page = client_for(actors.viewer).get(f"/teams/{actors.team.pk}/catalogue/").content.decode()

    assert "retired on 2026-05-30; served as Kimi K2.6 since" in page
    assert "retires 2026-05-30" not in page
    models_table = page.split('id="cards-heading"')[0]
    rows = {row.split("</code>")[0].rsplit("<code>", 1)[-1]: row for row in models_table.split("<tr")[1:]}
    k25 = rows["@cf/moonshotai/kimi-k2.5"]
    today = "$0.95 in · $0.16 cached · $4 out per M tokens"
    assert today in k25
    for engine in (rows["@local/smollm2-135m-instruct"], rows["@local/gemma-3-270m"]):  # both engine models
        assert today in engine, "one price for Kimi K2.5, the engine's too"
        assert "Priced as Kimi K2.5 (retired on 2026-05-30; served as Kimi K2.6 since)" in engine
        assert "$0.60" not in engine


def test_only_owners_may_allow_unpriced_requests_and_it_is_audited(actors: Actors) -> None:
    url = f"/teams/{actors.team.pk}/budgets/unpriced/"

    assert client_for(actors.admin).post(url, {"allow_unpriced": "on"}).status_code == 403
    assert (
        "owners change this"
        in client_for(actors.admin).get(f"/teams/{actors.team.pk}/budgets/").content.decode()
    )
    assert client_for(actors.owner).post(url, {"allow_unpriced": "on"}).status_code == 302

    assert TeamBudget.objects.get(team=actors.team).allow_unpriced is True
    event = AuditEvent.objects.get(action=AuditAction.UNPRICED_REQUESTS_CHANGED)
    assert (event.actor, event.detail) == (actors.owner, {"previous": False, "allowed": True})
    page = client_for(actors.owner).get(f"/teams/{actors.team.pk}/budgets/").content.decode()
    assert 'id="allow-unpriced" checked' in page


def test_a_budget_first_made_by_the_unpriced_switch_alerts_at_the_default_thresholds(actors: Actors) -> None:
    client_for(actors.owner).post(f"/teams/{actors.team.pk}/budgets/unpriced/", {"allow_unpriced": "on"})

    assert TeamBudget.objects.get(team=actors.team).alert_thresholds == DEFAULT_ALERT_THRESHOLDS
    page = client_for(actors.owner).get(f"/teams/{actors.team.pk}/budgets/").content.decode()
    assert 'value="50, 80, 100"' in page


def test_a_team_without_a_budget_is_offered_the_default_thresholds(actors: Actors) -> None:
    page = client_for(actors.owner).get(f"/teams/{actors.team.pk}/budgets/").content.decode()

    assert 'value="50, 80, 100"' in page
