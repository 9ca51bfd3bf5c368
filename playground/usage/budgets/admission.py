"""Admission: hold a request's worst case on its team's and member's ledgers before sending, or refuse.

A request whose model has no price card that day cannot be counted: while the team or the
member has a budget, `budget_reserve` refuses it (`UnpricedRefused`) unless an owner allowed
unpriced requests for the team (`TeamBudget.allow_unpriced`). Every path that reserves passes
the card, so none can skip that rule.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db import transaction

from playground.accounts.models import Team
from playground.providers.adapters import ChatRequest
from playground.usage.budgets.ledger import Reservation, ledger_id_for_month
from playground.usage.budgets.months import budget_month
from playground.usage.budgets.settlement import budget_reservations_sweep
from playground.usage.budgets.worst_case import request_worst_case_cost
from playground.usage.models import BudgetLedger, BudgetReservation
from playground.usage.money import money
from playground.usage.pricing import ZERO, KnownCard
from playground.usage.statements import raw_sql
from playground.usage.statements.admission import team_with_limits
from playground.usage.statements.ledger import ledger_hold

BUDGET_EXCEEDED = "budget_exceeded"
UNPRICED_REFUSED = "unpriced_refused"


class BudgetExceeded(Exception):
    """The request could cost more than what remains; the message says how much of which budget."""

    code = BUDGET_EXCEEDED


class UnpricedRefused(BudgetExceeded):
    """A budget applies and the model has no price card that day: its cost could not be counted."""

    code = UNPRICED_REFUSED


@dataclass(frozen=True)
class KeyBudget:
    """The API key a gateway request came with, and its own monthly limit (None: none)."""

    id: int
    name: str
    limit: Decimal | None


@dataclass(frozen=True)
class BudgetRequest:
    """One request to hold on the budgets: its worst case by `card`, the card that will price its
    record (`worst_case`)."""

    request: ChatRequest
    team_id: int
    user_id: int | None
    card: KnownCard
    label: str = ""
    key: KeyBudget | None = None


def budget_reserve_for_requests(requests: Sequence[BudgetRequest]) -> list[Reservation | BudgetExceeded]:
    """Reserve each request's worst case, or its refusal (`BudgetExceeded`, `UnpricedRefused`,
    with the message), exactly as if reserved one after the other in order.

    When every budget covers the group's sum, it is held with one conditional UPDATE per
    ledger and the reservations inserted together, in one transaction; otherwise (or for a
    request refused whatever the others do) they are reserved one at a time, in order.
    """
    amounts = [
        request_worst_case_cost(
            request=item.request, team_id=item.team_id, model_id=item.card.model_id, card=item.card
        )
        for item in requests
    ]
    if len(requests) > 1:
        with suppress(_GroupDoesNotFit):
            return list(_reserve_group(requests, amounts))
    results: list[Reservation | BudgetExceeded] = []
    for item, amount in zip(requests, amounts, strict=True):
        try:
            results.append(
                budget_reserve(
                    team_id=item.team_id,
                    user_id=item.user_id,
                    amount=amount,
                    card=item.card,
                    label=item.label,
                    key=item.key,
                )
            )
        except BudgetExceeded as exc:
            results.append(exc)
    return results


def budget_reserve(
    *,
    team_id: int,
    user_id: int | None,
    amount: Decimal,
    card: KnownCard,
    label: str = "",
    key: KeyBudget | None = None,
) -> Reservation:
    """Hold `amount` on the team's, the member's and the API key's ledgers of this month, or refuse.

    For a batch chunk sent as one upstream request, `amount` is the sum of its items'
    worst cases and `card` the one card that prices them all. Every reservation must end in
    `budget_reconcile` (with 0 when nothing ran). Raises `BudgetExceeded` when the team's or
    the member's remaining budget is smaller, `UnpricedRefused` when `card` found no card and
    a budget applies that the team did not open to unpriced requests.
    """
    plan = _hold_plan(team_id=team_id, user_id=user_id, card=card, key=key, limits={})
    with transaction.atomic():
        # In id order, as `budget_reconcile` takes them: two processes that lock the same rows
        # in different orders deadlock on PostgreSQL. Leaving the block with an exception rolls
        # back the holds made before it as well.
        for ledger, limit, whose in sorted(plan.holds, key=lambda hold: hold[0]):
            if not ledger_hold(ledger, amount, limit):
                raise BudgetExceeded(_refusal(ledger, amount, limit, whose=whose))
        (reservation,) = raw_sql.insert_many([plan.reservation(amount, label)])
    return Reservation(id=reservation.pk, amount=amount)


class _GroupDoesNotFit(Exception):
    """A budget does not cover a group's sum, or one of its requests is refused anyway."""


def _reserve_group(requests: Sequence[BudgetRequest], amounts: list[Decimal]) -> Iterator[Reservation]:
    limits: dict[tuple[int, int | None], _Limits] = {}  # read once per team and member
    try:
        plans = [
            _hold_plan(
                team_id=item.team_id, user_id=item.user_id, card=item.card, key=item.key, limits=limits
            )
            for item in requests
        ]
    except UnpricedRefused:
        raise _GroupDoesNotFit from None
    sums: dict[int, tuple[Decimal, Decimal | None]] = {}  # ledger: (the group's sum, its limit)
    for plan, amount in zip(plans, amounts, strict=True):
        for ledger, limit, _ in plan.holds:
            sums[ledger] = (sums.get(ledger, (ZERO, None))[0] + amount, limit)
    with transaction.atomic():
        for ledger in sorted(sums):  # in id order, as `budget_reserve`
            total, limit = sums[ledger]
            if not ledger_hold(ledger, total, limit):
                raise _GroupDoesNotFit  # rolls back the holds made before it
        rows = raw_sql.insert_many(
            [
                plan.reservation(amount, item.label)
                for plan, amount, item in zip(plans, amounts, requests, strict=True)
            ]
        )
    for row, amount in zip(rows, amounts, strict=True):
        yield Reservation(id=row.pk, amount=amount)


type _Limits = tuple[Team, Decimal | None, bool, Decimal | None]


@dataclass(frozen=True)
class _HoldPlan:
    """The ledgers one request holds its amount on, with their limits and whose they are."""

    team_id: int
    ledgers: tuple[int, int | None, int | None]  # the team's, the member's, the key's
    holds: list[tuple[int, Decimal | None, str]]

    def reservation(self, amount: Decimal, label: str) -> BudgetReservation:
        team_ledger, member_ledger, key_ledger = self.ledgers
        return BudgetReservation(
            team_id=self.team_id,
            team_ledger_id=team_ledger,
            member_ledger_id=member_ledger,
            key_ledger_id=key_ledger,
            amount_usd=amount,
            label=label[:120],
        )


def _hold_plan(
    *,
    team_id: int,
    user_id: int | None,
    card: KnownCard,
    key: KeyBudget | None,
    limits: dict[tuple[int, int | None], _Limits],
) -> _HoldPlan:
    """What to hold for one request (limits read now, or from `limits` when a group read them),
    or `UnpricedRefused`."""
    if (team_id, user_id) not in limits:
        limits[team_id, user_id] = team_with_limits(team_id=team_id, user_id=user_id)
    team, team_limit, allow_unpriced, member_limit = limits[team_id, user_id]
    month = budget_month(team)
    _sweep_now_and_then(team_id)
    key_limit = key.limit if key is not None else None
    if (
        card.card is None
        and not allow_unpriced
        and any(limit is not None for limit in (team_limit, member_limit, key_limit))
    ):
        whose = (
            "the team's"
            if team_limit is not None
            else "your"
            if member_limit is not None
            else _key_whose(key)
        )
        raise UnpricedRefused(_unpriced_refusal(card, whose=whose))
    team_ledger = ledger_id_for_month(team=team, user_id=None, month=month)
    member_ledger = (
        ledger_id_for_month(team=team, user_id=user_id, month=month) if user_id is not None else None
    )
    key_ledger = (
        ledger_id_for_month(team=team, user_id=None, month=month, api_key_id=key.id)
        if key is not None
        else None
    )
    holds = [
        (ledger, limit, whose)
        for ledger, limit, whose in (
            (team_ledger, team_limit, "the team's"),
            (member_ledger, member_limit, "your"),
            (key_ledger, key_limit, _key_whose(key)),
        )
        if ledger is not None
    ]
    return _HoldPlan(team_id=team_id, ledgers=(team_ledger, member_ledger, key_ledger), holds=holds)


_last_sweeps: dict[int, float] = {}


def _sweep_now_and_then(team_id: int) -> None:
    """The team's stale reservations released, at most every `BUDGET_SWEEP_EVERY` seconds per
    process: a reservation is stale only after `BUDGET_RESERVATION_TTL`, an hour by default."""
    now = time.monotonic()
    if now - _last_sweeps.get(team_id, -math.inf) < settings.BUDGET_SWEEP_EVERY:
        return
    _last_sweeps[team_id] = now
    budget_reservations_sweep(team_id=team_id)


def _refusal(ledger_id: int, amount: Decimal, limit: Decimal | None, *, whose: str) -> str:
    ledger = BudgetLedger.objects.get(pk=ledger_id)
    remaining = max(ZERO, Decimal(limit or 0) - ledger.spent_usd - ledger.reserved_usd)
    return (
        f"This request could cost up to {money(amount)}; {money(remaining)} of {whose} "
        f"{money(Decimal(limit or 0))} budget remains this month."
    )


def _key_whose(key: KeyBudget | None) -> str:
    return f"the API key {key.name!r}'s" if key is not None else "the key's"


def _unpriced_refusal(card: KnownCard, *, whose: str) -> str:
    return (
        f"{card.model_id} has no price card for {card.day.isoformat()}, so {whose} budget cannot "
        "count what this request would cost: nothing was sent. Set a price on the Catalogue page "
        "(a team price override is enough), or an owner can allow unpriced requests on the Budgets page."
    )
