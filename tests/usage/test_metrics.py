"""The one record writer counts every committed usage record in the Prometheus metrics, with
bounded labels; the team budgets' share is read at scrape time."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.db import transaction
from django.utils import timezone

from playground.catalog.seed import KIMI_K26
from playground.lib.metrics import REQUEST_LABELS, metrics_exposition
from playground.providers.models import ProviderConnection
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.budgets.months import budget_month
from playground.usage.calls.context import Attribution, RequestContext, RouteRecord
from playground.usage.metering import Outcome
from playground.usage.metrics import OTHER_MODEL, BudgetCollector
from playground.usage.models import BudgetLedger, RequestPath, TeamBudget, UsageSource, UsageStatus
from playground.usage.records import usage_records_create_many
from tests.support.actors import Actors
from tests.support.analytics import record_write
from tests.support.metrics import Scrape, scrape_counters

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: records are counted after them


def gateway_context(
    actors: Actors, connection: ProviderConnection, model: str, **more: object
) -> RequestContext:
    return RequestContext(
        team_id=actors.team.pk,
        user_id=actors.owner.pk,
        connection_id=connection.pk,
        model_id=model,
        path=RequestPath.GATEWAY,
        **more,  # type: ignore[arg-type]
    )


def write(context: RequestContext, *, status: str = UsageStatus.OK) -> None:
    record_write(
        timezone.now(),
        context,
        prompt=2400,
        cached=2048,
        out=35,
        ttft=120,
        latency=1500,
        status=status,
        written=300,
    )


def test_a_committed_record_counts_its_request_tokens_cost_and_timings(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    labels = {"path": "gateway", "team": str(actors.team.pk), "connection": str(workers_connection.pk)}
    timing = {"path": "gateway", "connection": str(workers_connection.pk), "model": KIMI_K26}
    before = scrape_counters()

    write(gateway_context(actors, workers_connection, KIMI_K26))

    after = scrape_counters()

    def added(name: str, **more: str) -> float:
        return after.value(name, **more) - before.value(name, **more)

    assert added("playground_requests_total", status="ok", model=KIMI_K26, **labels) == 1
    tokens = {kind: added("playground_tokens_total", kind=kind, model=KIMI_K26, **labels) for kind in
              ("input", "cached", "cache_write", "output")}  # fmt: skip
    assert tokens == {"input": 2400, "cached": 2048, "cache_write": 300, "output": 35}
    assert added("playground_cost_usd_total", model=KIMI_K26, **labels) > 0
    assert added("playground_request_latency_seconds_count", **timing) == 1
    assert added("playground_request_latency_seconds_bucket", le="1.0", **timing) == 0
    assert added("playground_request_latency_seconds_bucket", le="2.5", **timing) == 1
    assert added("playground_time_to_first_token_seconds_bucket", le="0.25", **timing) == 1
    assert added("playground_time_to_first_token_seconds_sum", **timing) == pytest.approx(0.12)


def test_a_group_rolled_back_counts_nothing(actors: Actors, workers_connection: ProviderConnection) -> None:
    before = scrape_counters().total("playground_requests_total", team=str(actors.team.pk))
    context = gateway_context(actors, workers_connection, KIMI_K26)
    outcome = Outcome(
        status=UsageStatus.OK,
        usage=NormalizedUsage(prompt_tokens=10, completion_tokens=1),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=100,
        latency_ms=200,
    )

    with pytest.raises(RuntimeError), transaction.atomic():
        usage_records_create_many([(context, outcome), (context, outcome)])
        raise RuntimeError("the group's budget settlement failed")

    assert scrape_counters().total("playground_requests_total", team=str(actors.team.pk)) == before


def test_labels_name_no_person_session_or_request_and_a_model_nobody_serves_is_other(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    attribution = Attribution(end_user="ana@example.com", session="session-42", tags=("prod",))
    team = str(actors.team.pk)
    before = scrape_counters()

    write(gateway_context(actors, workers_connection, KIMI_K26, attribution=attribution))
    # A client may name any model: refused upstream and unpriced, it is not a label of its own.
    write(gateway_context(actors, workers_connection, "made-up/model-1"), status=UsageStatus.UPSTREAM_ERROR)
    # Answered, an uncatalogued model (an OpenAI-compatible upstream's own) is.
    write(gateway_context(actors, workers_connection, "their/own-model"))
    after = scrape_counters()

    series = after.label_sets("playground_requests_total")
    assert {tuple(sorted(labels)) for labels in series} == {tuple(sorted(REQUEST_LABELS))}
    values = {value for labels in series for value in labels.values()}
    assert values.isdisjoint({"ana@example.com", "session-42", "prod", str(actors.owner.pk)})
    assert "made-up/model-1" not in values
    other = {
        "path": "gateway",
        "status": "upstream_error",
        "team": team,
        "connection": str(workers_connection.pk),
    }
    assert (
        after.value("playground_requests_total", model=OTHER_MODEL, **other)
        - before.value("playground_requests_total", model=OTHER_MODEL, **other)
        == 1
    )
    assert after.total("playground_requests_total", model="their/own-model", team=team) == 1


def test_fallbacks_and_downgrades_are_counted_from_the_routed_record(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    team = str(actors.team.pk)
    before = scrape_counters()

    route = RouteRecord(rule="cheap first", fell_back=True, downgraded=True, detail={"attempts": []})
    write(gateway_context(actors, workers_connection, KIMI_K26, route=route))

    after = scrape_counters()
    for outcome in ("fell_back", "downgraded"):
        added = after.value("playground_routing_outcomes_total", outcome=outcome, team=team) - before.value(
            "playground_routing_outcomes_total", outcome=outcome, team=team
        )
        assert added == 1


def test_budget_share_is_read_from_this_months_ledger_at_scrape_time(actors: Actors) -> None:
    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal("10.00"))
    TeamBudget.objects.create(team=actors.other_team, monthly_limit_usd=None)  # no limit: no gauge
    month = budget_month(actors.team)
    BudgetLedger.objects.create(team=actors.team, month=month, spent_usd=Decimal("2.5"))
    BudgetLedger.objects.create(  # last month's spend is not this month's
        team=actors.team, month=(month - dt.timedelta(days=1)).replace(day=1), spent_usd=Decimal("9")
    )

    scrape = Scrape.parse(metrics_exposition([BudgetCollector()]).decode())

    team = str(actors.team.pk)
    assert scrape.value("playground_budget_used_ratio", team=team) == 0.25
    assert scrape.value("playground_budget_limit_usd", team=team) == 10
    assert scrape.value("playground_budget_spent_usd", team=team) == 2.5
    assert scrape.label_sets("playground_budget_used_ratio") == [{"team": team}]
    assert scrape.value("playground_team_info", team=team, slug="alpha") == 1
