"""Budgets hold: every metered call reserves its worst case atomically and reconciles it.

The race test sends 20 requests from 20 threads (each with its own database connection)
when the budget covers 3: on PostgreSQL at most 3 may be admitted. The others check that a
reservation is given back on an upstream error and on a cancel, that a refused request is
never sent and leaves a `rejected` record of cost 0, and that months follow the team's zone.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import threading
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connection, connections
from django.utils import timezone

from playground.accounts.models import Membership
from playground.catalog.models import CatalogModel, PriceCard
from playground.providers.adapters import ChatRequest
from playground.providers.adapters.openai_compat import OpenAICompatAdapter
from playground.usage.budgets import (
    BUDGET_EXCEEDED,
    BudgetExceeded,
    budget_month,
    budget_reconcile,
    budget_reservations_sweep,
    budget_reserve,
    budget_status,
    request_worst_case_cost,
)
from playground.usage.calls.budget import (
    BudgetHold,
    HeldByCaller,
    HoldAtAdmission,
    HoldOnSend,
    calls_hold_together,
)
from playground.usage.calls.call import MeteredCall
from playground.usage.calls.context import RequestContext
from playground.usage.estimates import worst_case_estimate
from playground.usage.models import (
    BudgetAlert,
    BudgetLedger,
    BudgetReservation,
    TeamBudget,
    UsageRecord,
    UsageStatus,
)
from playground.usage.pricing import KnownCard
from playground.usage.records import price_card_known
from playground.usage.tasks import budget_alert_email
from tests.fakes.upstream import FakeUpstream, error, openai_chunk, paced, sse, usage, usage_chunk
from tests.support.actors import Actors

MODEL = "@cf/test/budgeted"
# $1 per 1,000 output tokens and nothing for input: a request with max_tokens=1000 may cost $1.
CARD = {"input_per_m": Decimal(0), "cached_input_per_m": None, "output_per_m": Decimal(1000)}


@pytest.fixture
def priced_model(db: None) -> CatalogModel:
    model = CatalogModel.objects.create(
        model_id=MODEL, display_name="Budgeted", served_by="openai-compatible"
    )
    PriceCard.objects.create(model=model, effective_from=dt.date(2026, 1, 1), label="Test list price", **CARD)
    return model


def priced(actors: Actors) -> KnownCard:
    """The test model's card today, as the metered call looks it up."""
    return price_card_known(model_id=MODEL, day=timezone.now().date(), team_id=actors.team.pk)


def set_budget(actors: Actors, usd: str, *, thresholds: list[int] | None = None) -> None:
    TeamBudget.objects.update_or_create(
        team=actors.team, defaults={"monthly_limit_usd": Decimal(usd), "alert_thresholds": thresholds or []}
    )


def call(
    actors: Actors,
    upstream: FakeUpstream,
    *,
    max_tokens: int = 1000,
    source: str = "",
    budget: BudgetHold | None = None,
) -> MeteredCall:
    return MeteredCall(
        adapter=OpenAICompatAdapter(base_url=upstream.url + "/v1", token="t"),
        request=ChatRequest(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=max_tokens),
        context=RequestContext(
            team_id=actors.team.pk,
            user_id=actors.teammate.pk,
            connection_id=None,
            model_id=MODEL,
            source=source,
        ),
        budget=budget or HoldOnSend(),
    )


def team_ledger(actors: Actors) -> BudgetLedger:
    return BudgetLedger.objects.get(team=actors.team, user__isnull=True)


def cheap_answer() -> Any:
    return sse([openai_chunk("ok", finish_reason="stop"), usage_chunk(usage(5, 10))])


def test_the_worst_case_is_the_prompt_estimate_at_the_input_price_plus_max_tokens_at_the_output_price(
    actors: Actors, priced_model: CatalogModel
) -> None:
    PriceCard.objects.filter(model=priced_model).update(input_per_m=Decimal(2))
    request = ChatRequest(model=MODEL, messages=[{"role": "user", "content": "x" * 4000}], max_tokens=500)
    # 1,000 prompt tokens (4 characters each) x $2/M + 500 x $1000/M
    assert request_worst_case_cost(request=request, team_id=actors.team.pk, model_id=MODEL) == Decimal(
        "0.502"
    )


@pytest.mark.parametrize(("write_price", "worst"), [(None, "0.502"), ("1.5", "0.502"), ("2.5", "0.5025")])
def test_the_worst_case_prices_the_prompt_at_the_cache_write_price_when_it_is_dearer_than_input(
    actors: Actors, priced_model: CatalogModel, write_price: str | None, worst: str
) -> None:
    """Every prompt token may be written to the cache: a budget must not be overrun by writes."""
    PriceCard.objects.filter(model=priced_model).update(
        input_per_m=Decimal(2), cache_write_input_per_m=Decimal(write_price) if write_price else None
    )
    request = ChatRequest(model=MODEL, messages=[{"role": "user", "content": "x" * 4000}], max_tokens=500)

    reserved = request_worst_case_cost(request=request, team_id=actors.team.pk, model_id=MODEL)

    assert reserved == Decimal(worst)
    # the chat's "at most" figure is the same worst case, through the one cost function
    assert worst_case_estimate(card=priced(actors), prompt_tokens=1000, output_tokens=500).cost == reserved


def test_a_request_without_max_tokens_is_reserved_at_the_default_cap(
    actors: Actors, priced_model: CatalogModel, settings: Any
) -> None:
    settings.BUDGET_DEFAULT_MAX_TOKENS = 2000
    request = ChatRequest(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert request_worst_case_cost(request=request, team_id=actors.team.pk, model_id=MODEL) == Decimal(2)


def test_an_admitted_request_is_reconciled_to_its_actual_cost(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    set_budget(actors, "5")
    fake_upstream.script(cheap_answer())

    metered = call(actors, fake_upstream)
    metered.run()

    assert metered.record is not None and metered.record.status == UsageStatus.OK
    assert metered.record.total_cost == Decimal("0.01")  # 10 output tokens at $1000/M
    ledger = team_ledger(actors)
    assert (ledger.spent_usd, ledger.reserved_usd) == (Decimal("0.01"), Decimal(0))
    reservation = BudgetReservation.objects.get()
    assert reservation.settled_at is not None and reservation.actual_usd == Decimal("0.01")


def test_a_call_meant_to_be_held_at_admission_is_never_sent_unheld(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    set_budget(actors, "5")
    metered = call(actors, fake_upstream, budget=HoldAtAdmission())

    with pytest.raises(RuntimeError, match="held at admission"):
        metered.run()  # its admission never ran calls_hold_together

    assert fake_upstream.requests == []
    assert metered.outcome is None and not BudgetReservation.objects.exists()


def test_a_call_whose_caller_holds_the_budget_neither_holds_nor_settles_it(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    set_budget(actors, "0.001")  # far below the worst case: a hold here would be refused
    fake_upstream.script(cheap_answer())
    metered = call(actors, fake_upstream, budget=HeldByCaller())

    metered.run()

    assert metered.record is not None and metered.record.status == UsageStatus.OK
    assert metered.reservation is None and not BudgetReservation.objects.exists()
    ledger = BudgetLedger.objects.filter(team=actors.team, user__isnull=True).first()
    assert ledger is None or (ledger.spent_usd, ledger.reserved_usd) == (Decimal(0), Decimal(0))


def test_a_call_reserved_ahead_then_abandoned_is_recorded_and_gives_its_hold_back(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    set_budget(actors, "5")
    metered = call(actors, fake_upstream, budget=HoldAtAdmission())
    calls_hold_together([metered])  # as the gateway's admission does, in its own worker thread
    assert team_ledger(actors).reserved_usd > 0

    async_to_sync(metered.abandon)()  # its client left before events() began

    assert metered.record is not None
    assert (metered.record.status, metered.record.total_cost) == (UsageStatus.CLIENT_DISCONNECTED, 0)
    ledger = team_ledger(actors)
    assert (ledger.spent_usd, ledger.reserved_usd) == (Decimal(0), Decimal(0))
    assert fake_upstream.requests == []


def test_a_request_over_the_budget_is_refused_never_sent_and_recorded_as_rejected_at_no_cost(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    set_budget(actors, "0.75")

    metered = call(actors, fake_upstream)
    answer = metered.run()

    assert fake_upstream.requests == []
    record = metered.record
    assert record is not None and record.status == UsageStatus.REJECTED
    assert record.total_cost == 0 and record.error_code == BUDGET_EXCEEDED
    assert record.error_text == (
        "This request could cost up to $1.00; $0.75 of the team's $0.75 budget remains this month."
    )
    assert answer.error is not None and answer.error.message == record.error_text
    assert team_ledger(actors).reserved_usd == 0


def test_a_members_own_budget_refuses_them_while_the_team_still_has_money(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    set_budget(actors, "100")
    Membership.objects.filter(user=actors.teammate).update(monthly_budget_usd=Decimal("0.50"))

    metered = call(actors, fake_upstream)
    metered.run()

    assert metered.record is not None and metered.record.status == UsageStatus.REJECTED
    assert "of your $0.50 budget remains this month" in metered.record.error_text
    assert team_ledger(actors).reserved_usd == 0, "the team's hold was rolled back with the member's refusal"
    assert fake_upstream.requests == []


def test_the_reservation_is_released_when_the_upstream_fails(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    set_budget(actors, "1.5")
    fake_upstream.script(error(500), error(500), error(500))

    metered = call(actors, fake_upstream)
    metered.run()

    assert metered.record is not None and metered.record.status == UsageStatus.UPSTREAM_ERROR
    ledger = team_ledger(actors)
    assert ledger.reserved_usd == 0 and ledger.spent_usd == metered.record.total_cost
    fake_upstream.script(cheap_answer())
    again = call(actors, fake_upstream)
    again.run()
    assert again.record is not None and again.record.status == UsageStatus.OK, "the $1 hold came back"


@pytest.mark.django_db(transaction=True)
async def test_the_reservation_is_reconciled_when_the_request_is_cancelled(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    await TeamBudget.objects.acreate(team=actors.team, monthly_limit_usd=Decimal("1.5"), alert_thresholds=[])
    fake_upstream.script(paced(200, 20))
    metered = call(actors, fake_upstream)
    first = asyncio.Event()

    async def consume() -> None:
        async for _event in metered.events():
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 5)
    assert (await BudgetLedger.objects.aget(team=actors.team, user__isnull=True)).reserved_usd == Decimal(1)
    task.cancel()
    await asyncio.wait({task})

    assert metered.record is not None and metered.record.status == UsageStatus.CLIENT_DISCONNECTED
    ledger = await BudgetLedger.objects.aget(team=actors.team, user__isnull=True)
    assert ledger.reserved_usd == 0
    assert ledger.spent_usd == metered.record.total_cost > 0


def test_a_reservation_is_reconciled_once(actors: Actors, priced_model: CatalogModel) -> None:
    reservation = budget_reserve(
        team_id=actors.team.pk, user_id=actors.teammate.pk, amount=Decimal(2), card=priced(actors)
    )

    assert budget_reconcile(reservation=reservation, actual=Decimal("0.5")) is True
    assert budget_reconcile(reservation=reservation, actual=Decimal("0.5")) is False

    ledger = team_ledger(actors)
    assert (ledger.spent_usd, ledger.reserved_usd) == (Decimal("0.5"), Decimal(0))


def test_a_reservation_nobody_reconciled_is_released_by_the_sweep(
    actors: Actors, priced_model: CatalogModel, settings: Any
) -> None:
    set_budget(actors, "3")
    budget_reserve(
        team_id=actors.team.pk, user_id=None, amount=Decimal(3), card=priced(actors)
    )  # its process "died"
    with pytest.raises(BudgetExceeded):
        budget_reserve(team_id=actors.team.pk, user_id=None, amount=Decimal(1), card=priced(actors))

    BudgetReservation.objects.update(created_at=timezone.now() - dt.timedelta(hours=2))
    settings.BUDGET_RESERVATION_TTL = 3600
    assert budget_reservations_sweep(team_id=actors.team.pk) == 1
    budget_reserve(team_id=actors.team.pk, user_id=None, amount=Decimal(1), card=priced(actors))


def test_the_month_rolls_over_at_midnight_in_the_teams_time_zone(
    actors: Actors, priced_model: CatalogModel
) -> None:
    late_october_utc = dt.datetime(2026, 10, 31, 12, 0, tzinfo=dt.UTC)  # already 1 November in Auckland
    assert budget_month(actors.team, now=late_october_utc) == dt.date(2026, 10, 1)
    actors.team.time_zone = "Pacific/Auckland"
    actors.team.save()
    assert budget_month(actors.team, now=late_october_utc) == dt.date(2026, 11, 1)


def test_last_months_spend_does_not_count_against_this_month(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    set_budget(actors, "1.5")
    last_month = budget_month(actors.team) - dt.timedelta(days=1)
    BudgetLedger.objects.create(team=actors.team, month=last_month.replace(day=1), spent_usd=Decimal(100))
    UsageRecord.objects.create(
        team=actors.team, model_id=MODEL, status=UsageStatus.OK, total_cost=Decimal(100)
    )
    UsageRecord.objects.update(created_at=timezone.now() - dt.timedelta(days=40))
    fake_upstream.script(cheap_answer())

    metered = call(actors, fake_upstream)
    metered.run()

    assert metered.record is not None and metered.record.status == UsageStatus.OK


def test_a_new_months_ledger_starts_from_the_records_already_written(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    set_budget(actors, "1.5")
    UsageRecord.objects.create(team=actors.team, model_id=MODEL, status=UsageStatus.OK, total_cost=Decimal(1))

    metered = call(actors, fake_upstream)
    metered.run()

    assert metered.record is not None and metered.record.status == UsageStatus.REJECTED
    assert "$0.50 of the team's $1.50" in metered.record.error_text


def test_each_alert_threshold_is_emailed_once_a_month(
    actors: Actors, priced_model: CatalogModel, mailoutbox: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    set_budget(actors, "10", thresholds=[50, 80, 100])
    managers_have_email(actors)

    for spend in ("4", "1.5", "0.5", "1"):  # 40 %, 55 %, 60 %, 70 %
        with django_capture_on_commit_callbacks(execute=True):
            reservation = budget_reserve(
                team_id=actors.team.pk, user_id=None, amount=Decimal(1), card=priced(actors)
            )
            budget_reconcile(reservation=reservation, actual=Decimal(spend))

    assert [message.subject for message in mailoutbox] == ["Alpha has used 50% of its monthly budget"]
    assert mailoutbox[0].to == ["owner@example.com"]
    assert mailoutbox[0].body == "Alpha has spent $5.50 of its $10.00 budget for " + (
        f"{budget_month(actors.team):%B %Y} (50% alert).\n"
    ), "the spend when the e-mail went out"
    assert budget_status(team=actors.team).crossed == [50]


# --- alert e-mail ----------------------------------------------------------------------------


def managers_have_email(actors: Actors) -> None:
    actors.owner.email = "owner@example.com"
    actors.owner.save()


def cross_half_of_a_ten_dollar_budget(actors: Actors) -> None:
    set_budget(actors, "10", thresholds=[50])
    reservation = budget_reserve(team_id=actors.team.pk, user_id=None, amount=Decimal(1), card=priced(actors))
    budget_reconcile(reservation=reservation, actual=Decimal(5))


def test_an_alert_is_emailed_by_a_task_only_once_the_transaction_that_recorded_it_commits(
    actors: Actors, priced_model: CatalogModel, mailoutbox: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    managers_have_email(actors)

    with django_capture_on_commit_callbacks() as committed:
        cross_half_of_a_ten_dollar_budget(actors)
        assert mailoutbox == [], "nothing is sent inside the request's transaction"
        alert = BudgetAlert.objects.get(threshold=50)
        assert alert.emailed_at is None

    assert len(committed) == 1
    committed[0]()  # the commit enqueues the task (run eagerly here, CELERY_TASK_ALWAYS_EAGER)
    assert [message.to for message in mailoutbox] == [["owner@example.com"]]
    alert.refresh_from_db()
    assert alert.emailed_at is not None


def test_an_alert_task_delivered_twice_emails_once(
    actors: Actors, priced_model: CatalogModel, mailoutbox: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    managers_have_email(actors)
    with django_capture_on_commit_callbacks(execute=True):
        cross_half_of_a_ten_dollar_budget(actors)
    alert = BudgetAlert.objects.get(threshold=50)

    budget_alert_email.delay(alert.pk)  # a redelivery of the same message

    assert len(mailoutbox) == 1


@pytest.fixture
def refusing_mail_server(settings: Any) -> int:
    """The default mailer pointed at a loopback port where nothing listens: every send fails."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": port, "timeout": 2},
        }
    }
    return port


@pytest.mark.django_db(transaction=True)
def test_a_failing_mail_server_fails_neither_the_request_nor_its_record(
    actors: Actors,
    priced_model: CatalogModel,
    fake_upstream: FakeUpstream,
    refusing_mail_server: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    set_budget(actors, "0.02", thresholds=[50])  # max_tokens=20 may cost $0.02; the answer costs $0.01
    managers_have_email(actors)
    fake_upstream.script(cheap_answer())

    metered = call(actors, fake_upstream, max_tokens=20)
    answer = metered.run()

    assert answer.error is None and answer.text == "ok"
    assert metered.record is not None and metered.record.status == UsageStatus.OK
    assert team_ledger(actors).spent_usd == Decimal("0.01") == metered.record.total_cost
    alert = BudgetAlert.objects.get(team=actors.team)
    assert alert.threshold == 50 and alert.emailed_at is None, "not e-mailed, and the record says so"
    assert "could not email the 50% budget alert" in caplog.text


def test_records_are_priced_by_the_teams_override_and_say_so(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    PriceCard.objects.create(
        model=priced_model,
        team=actors.team,
        effective_from=dt.date(2026, 1, 1),
        label="Negotiated rate for Alpha (team override)",
        input_per_m=Decimal(0),
        output_per_m=Decimal(500),
    )
    fake_upstream.script(cheap_answer())

    metered = call(actors, fake_upstream)
    metered.run()

    record = metered.record
    assert record is not None and record.price_card is not None
    assert record.price_card.is_override and "override" in record.price_card.label
    assert record.total_cost == Decimal("0.005")


# --- the race ------------------------------------------------------------------------------------

CONCURRENT = 20


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="the race needs PostgreSQL (make test-services): SQLite serializes every writer, so "
    "concurrent admissions cannot interleave there and the test would prove nothing",
)
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_requests_on_a_budget_that_covers_three_admit_at_most_three(
    actors: Actors, priced_model: CatalogModel, fake_upstream: FakeUpstream
) -> None:
    set_budget(actors, "3.5")  # each request may cost $1
    # Slow answers: every admitted request still holds its reservation while the others try.
    fake_upstream.script(
        *[sse([openai_chunk("ok", finish_reason="stop"), usage_chunk(usage(1, 1))], first_delay=1.0)]
        * CONCURRENT
    )
    start = threading.Barrier(CONCURRENT)
    calls = [call(actors, fake_upstream, source=f"race:{index}") for index in range(CONCURRENT)]
    failures: list[BaseException] = []

    def send(metered: MeteredCall) -> None:
        try:
            start.wait()
            metered.run()
        except BaseException as exc:
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send, args=(metered,)) for metered in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert not failures
    statuses = [metered.record.status if metered.record else None for metered in calls]
    assert statuses.count(UsageStatus.OK) == 3, statuses
    assert statuses.count(UsageStatus.REJECTED) == CONCURRENT - 3
    assert len(fake_upstream.requests) == 3
    ledger = team_ledger(actors)
    assert ledger.reserved_usd == 0 and ledger.spent_usd == Decimal("0.003")
