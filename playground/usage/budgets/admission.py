"""Admission: hold a request's worst case on its team's and member's ledgers before sending, or refuse.

A request whose model has no price card that day cannot be counted: while the team or the
member has a budget, `budget_reserve` refuses it (`UnpricedRefused`) unless an owner allowed
unpriced requests for the team (`TeamBudget.allow_unpriced`). Every path that reserves passes
the card, so none can skip that rule.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from playground.accounts.models import Membership, Team
from playground.lib import raw_sql
from playground.providers.adapters import ChatRequest
from playground.usage.budgets.ledger import Reservation, ledger_hold, ledger_id_for_month
from playground.usage.budgets.months import budget_month
from playground.usage.budgets.settlement import budget_reservations_sweep
from playground.usage.budgets.worst_case import request_worst_case_cost
from playground.usage.models import BudgetLedger, BudgetReservation, TeamBudget
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
        reservation_id = _reservation_insert(
            team_id=team_id,
            ledgers=(team_ledger, member_ledger, key_ledger),
            amount=amount,
            label=label[:120],
        )
    return Reservation(id=reservation_id, amount=amount)


def _team_with_limits(
    *, team_id: int, user_id: int | None
) -> tuple[Team, Decimal | None, bool, Decimal | None]:
    """The team, its budget's limit and rule for unpriced requests, and the member's limit, read
    in one statement at every admission: a limit changed a moment ago applies to the next request.
    Hand-written (`lib.raw_sql`): every gateway request runs it (issue 24)."""
    with connection.cursor() as cursor:
        cursor.execute(_team_with_limits_sql(connection.vendor), [user_id, team_id])
        row = cursor.fetchone()
    if row is None:
        raise Team.DoesNotExist(f"No team {team_id}")
    teams = raw_sql.column_count(Team)
    team_limit, allow_unpriced, member_limit = row[teams:]
    return (
        raw_sql.from_row(Team, row[:teams]),
        raw_sql.field_value(TeamBudget, "monthly_limit_usd", team_limit),
        bool(raw_sql.field_value(TeamBudget, "allow_unpriced", allow_unpriced)),
        raw_sql.field_value(Membership, "monthly_budget_usd", member_limit),
    )


@functools.cache
def _team_with_limits_sql(vendor: str) -> str:
    """The statement, made once per database vendor. No member (user None) joins no membership."""
    team_id = raw_sql.column(Team, "id", alias="t")
    return (
        f"SELECT {raw_sql.select_list(Team, 't')}, "  # noqa: S608
        f"{raw_sql.columns(TeamBudget, 'monthly_limit_usd', 'allow_unpriced', alias='b')}, "
        f"{raw_sql.column(Membership, 'monthly_budget_usd', alias='m')} "
        f"FROM {raw_sql.table(Team)} t "
        f"LEFT JOIN {raw_sql.table(TeamBudget)} b ON b.{raw_sql.column(TeamBudget, 'team')} = {team_id} "
        f"LEFT JOIN {raw_sql.table(Membership)} m ON m.{raw_sql.column(Membership, 'team')} = {team_id} "
        f"AND m.{raw_sql.column(Membership, 'user')} = %s "
        f"WHERE {team_id} = %s"
    )


_last_sweeps: dict[int, float] = {}


def _reservation_insert(
    *, team_id: int, ledgers: tuple[int, int | None, int | None], amount: Decimal, label: str
) -> int:
    """The reservation's row (one hand-written INSERT, `lib.raw_sql`); its id."""
    values = [
        team_id,
        *ledgers,
        raw_sql.db_value(BudgetReservation, "amount_usd", amount),
        label,
        raw_sql.db_value(BudgetReservation, "created_at", timezone.now()),
    ]
    with connection.cursor() as cursor:
        cursor.execute(_reservation_insert_sql(connection.vendor), values)
        return int(cursor.fetchone()[0])


@functools.cache
def _reservation_insert_sql(vendor: str) -> str:
    names = ("team", "team_ledger", "member_ledger", "key_ledger", "amount_usd", "label", "created_at")
    columns = raw_sql.columns(BudgetReservation, *names)
    return (
        f"INSERT INTO {raw_sql.table(BudgetReservation)} ({columns}) "  # noqa: S608
        f"VALUES ({', '.join(['%s'] * len(names))}) RETURNING {raw_sql.column(BudgetReservation, 'id')}"
    )


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
