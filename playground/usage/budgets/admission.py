"""Admission: hold a request's worst case on its team's and member's ledgers before sending, or refuse.

A request whose model has no price card that day cannot be counted: while the team or the
member has a budget, `budget_reserve` refuses it (`UnpricedRefused`) unless an owner allowed
unpriced requests for the team (`TeamBudget.allow_unpriced`). Every path that reserves passes
the card, so none can skip that rule.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import DecimalField, F, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from playground.accounts.models import Membership, Team
from playground.providers.adapters import ChatRequest
from playground.usage.budgets.ledger import Reservation, ledger_hold, ledger_id_for_month
from playground.usage.budgets.months import budget_month
from playground.usage.budgets.settlement import budget_reservations_sweep
from playground.usage.budgets.worst_case import request_worst_case_cost
from playground.usage.models import BudgetLedger, BudgetReservation
from playground.usage.money import money
from playground.usage.pricing import ZERO
from playground.usage.services import KnownCard

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


def budget_reserve_for_request(
    *,
    request: ChatRequest,
    team_id: int,
    user_id: int | None,
    card: KnownCard,
    label: str = "",
    key: KeyBudget | None = None,
) -> Reservation:
    """Reserve a request's worst case by `card`, the one that will price its record; raises
    `BudgetExceeded` (or `UnpricedRefused`) with the refusal message."""
    amount = request_worst_case_cost(request=request, team_id=team_id, model_id=card.model_id, card=card)
    return budget_reserve(team_id=team_id, user_id=user_id, amount=amount, card=card, label=label, key=key)


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
    team, team_limit, allow_unpriced, member_limit = _team_with_limits(team_id=team_id, user_id=user_id)
    month = budget_month(team)
    _sweep_now_and_then(team_id)
    key_limit = key.limit if key is not None else None
    limits = (team_limit, member_limit, key_limit)
    if card.card is None and not allow_unpriced and any(limit is not None for limit in limits):
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
    with transaction.atomic():
        # In id order, as `budget_reconcile` takes them: two processes that lock the same rows
        # in different orders deadlock on PostgreSQL. Leaving the block with an exception rolls
        # back the holds made before it as well.
        for ledger, limit, whose in sorted(holds, key=lambda hold: hold[0]):
            if not ledger_hold(ledger, amount, limit):
                raise BudgetExceeded(_refusal(ledger, amount, limit, whose=whose))
        reservation = BudgetReservation.objects.create(
            team_id=team_id,
            team_ledger_id=team_ledger,
            member_ledger_id=member_ledger,
            key_ledger_id=key_ledger,
            amount_usd=amount,
            label=label[:120],
        )
    return Reservation(id=reservation.pk, amount=amount)


def _team_with_limits(
    *, team_id: int, user_id: int | None
) -> tuple[Team, Decimal | None, bool, Decimal | None]:
    """The team, its budget's limit and rule for unpriced requests, and the member's limit, read
    in one query at every admission: a limit changed a moment ago applies to the next request."""
    member_budget: Any = (
        Subquery(
            Membership.objects.filter(team_id=OuterRef("pk"), user_id=user_id).values("monthly_budget_usd")[
                :1
            ]
        )
        if user_id is not None
        else Value(None, output_field=DecimalField())
    )
    team: Any = Team.objects.annotate(
        budget_limit=F("budget__monthly_limit_usd"),
        budget_allow_unpriced=Coalesce(F("budget__allow_unpriced"), Value(False)),
        member_budget=member_budget,
    ).get(pk=team_id)
    return team, team.budget_limit, bool(team.budget_allow_unpriced), team.member_budget


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
