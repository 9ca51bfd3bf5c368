"""The top bar's context: one query per full page, none for an htmx fragment."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import cast

from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django_htmx.middleware import HtmxDetails
from pytest_django import DjangoAssertNumQueries

from playground.accounts.models import Membership, Role, Team
from playground.lib.web import HtmxHttpRequest
from playground.teams.context import topbar
from playground.usage.budgets import budget_month
from playground.usage.models import BudgetAlert, BudgetLedger, TeamBudget
from tests.support.actors import Actors
from tests.support.clients import client_for


def _budget(team: Team, *, spent: str, alerts: list[int], month: dt.date | None = None) -> None:
    month = month or budget_month(team)
    TeamBudget.objects.create(team=team, monthly_limit_usd=Decimal(10), alert_thresholds=[50, 80, 100])
    BudgetLedger.objects.create(team=team, month=month, spent_usd=Decimal(spent))
    for threshold in alerts:
        BudgetAlert.objects.create(team=team, month=month, threshold=threshold)


def _three_teams_over_budget(actors: Actors) -> None:
    _budget(actors.team, spent="8.5", alerts=[50, 80])
    Membership.objects.create(team=actors.other_team, user=actors.owner, role=Role.MEMBER)
    _budget(actors.other_team, spent="10", alerts=[50, 80, 100])
    charlie = Team.objects.create(name="Charlie", slug="charlie")
    Membership.objects.create(team=charlie, user=actors.owner, role=Role.MEMBER)
    last_month = budget_month(charlie) - dt.timedelta(days=1)
    _budget(charlie, spent="9", alerts=[80], month=last_month.replace(day=1))


def _alert_queries(queries: CaptureQueriesContext) -> list[str]:
    return [query["sql"] for query in queries.captured_queries if "accounts_budgetalert" in query["sql"]]


def test_the_top_bar_reads_every_team_and_its_banner_in_one_query(
    actors: Actors, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    _three_teams_over_budget(actors)
    request = cast("HtmxHttpRequest", RequestFactory().get("/chat/"))  # as the middleware hands it on
    request.user = actors.owner
    request.htmx = HtmxDetails(request)

    with django_assert_num_queries(1):
        context = topbar(request)
        teams = [team.name for team in context["teams"]]
        banners = [(banner.text, banner.exhausted) for banner in context["budget_banners"]]

    assert teams == ["Alpha", "Bravo", "Charlie"]
    month = f"{budget_month(actors.team):%B}"
    assert banners == [
        (f"Alpha has spent $8.50 of its $10.00 budget for {month} (85%; the 80% alert was reached).", False),
        (
            f"Bravo has spent $10.00 of its $10.00 budget for {month} (100%; the 100% alert was reached)."
            " Requests that cost anything are refused until the limit is raised or the month ends.",
            True,
        ),
    ], "Charlie's alert was last month: no banner"


def test_a_limit_lowered_under_the_spend_shows_the_banner_before_any_request_fails(actors: Actors) -> None:
    """No alert was raised (the spend was far under the old limit), yet nothing can run now."""
    _budget(actors.team, spent="4", alerts=[])
    client = client_for(actors.owner)
    assert "has spent" not in client.get("/chat/").content.decode()

    TeamBudget.objects.filter(team=actors.team).update(monthly_limit_usd=Decimal(3))
    page = client.get("/chat/").content.decode()

    month = f"{budget_month(actors.team):%B}"
    assert (
        f"Alpha has spent $4.00 of its $3.00 budget for {month} (133%). Every request is refused until "
        "the limit is raised or the month ends." in page
    )
    assert "budget-banner-exhausted" in page

    TeamBudget.objects.filter(team=actors.team).update(monthly_limit_usd=Decimal(20))  # raised: gone
    assert "has spent" not in client.get("/chat/").content.decode()


def test_a_full_page_asks_for_the_budget_alerts_once_whatever_the_number_of_teams(actors: Actors) -> None:
    _three_teams_over_budget(actors)
    client = client_for(actors.owner)

    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/teams/{actors.team.pk}/audit/").content.decode()

    assert len(_alert_queries(queries)) == 1
    assert "Alpha has spent $8.50" in page and 'class="team-chip">Charlie<' in page


def test_an_htmx_fragment_reads_no_top_bar(actors: Actors) -> None:
    _three_teams_over_budget(actors)
    client = client_for(actors.owner)

    with CaptureQueriesContext(connection) as queries:
        response = client.get(f"/usage/headline/?team={actors.team.pk}", headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert _alert_queries(queries) == []


def test_a_boosted_link_and_a_history_restore_are_whole_pages_with_the_top_bar(actors: Actors) -> None:
    _three_teams_over_budget(actors)
    client = client_for(actors.owner)

    for header in ("HX-Boosted", "HX-History-Restore-Request"):
        page = client.get("/chat/", headers={"HX-Request": "true", header: "true"}).content.decode()

        assert "Alpha has spent $8.50" in page, header
        assert 'class="team-chip">Bravo<' in page, header
