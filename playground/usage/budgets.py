"""Monthly budgets: reserve a request's worst case before it is sent, reconcile it after.

Every upstream request goes through `MeteredCall`, which calls `budget_reserve_for_request`
before sending and `budget_reconcile` in the shielded step that writes the usage record, so
chat turns, tool continuations and batch items all hold the same budget. A batch that
sends a chunk of items in one upstream request (the queue path) reserves the chunk's worst
case with `budget_reserve` and reconciles it with `budget_reconcile` once its records exist.

Admission is one conditional UPDATE per ledger row (the team's, then the member's) in one
transaction:

    UPDATE ledger SET reserved = reserved + cost
    WHERE id = … AND spent <= limit - cost - reserved

The database re-checks the condition against the row as the previous writer left it
(PostgreSQL waits for that writer's lock, SQLite serializes writers), so concurrent
requests cannot all pass a check made before any of them was counted (LiteLLM #34732).

Worst case = estimated prompt tokens x the input price (no cache discount) + max_tokens x
the output price, with the price card that will price the record (the team's override when
one applies). A request without max_tokens is reserved at `BUDGET_DEFAULT_MAX_TOKENS`
output tokens: an answer longer than that may overshoot the budget by the difference, which
the reconcile step then counts in full.

A request whose model has no price card that day cannot be counted: while the team or the
member has a budget, `budget_reserve` refuses it (`UnpricedRefused`) unless an owner allowed
unpriced requests for the team (`TeamBudget.allow_unpriced`). Every path that reserves passes
the card, so none can skip that rule.

Months start at midnight on the 1st in the team's time zone.
"""

from __future__ import annotations

import datetime as dt
import logging
import zoneinfo
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.utils import timezone

from playground.accounts.models import (
    ROLES_THAT_CAN_MANAGE,
    BudgetAlert,
    BudgetLedger,
    BudgetReservation,
    Membership,
    Team,
    TeamBudget,
)
from playground.providers.adapters import ChatRequest
from playground.usage.metering import estimate_tokens
from playground.usage.models import UsageRecord
from playground.usage.pricing import PER_MILLION, ZERO
from playground.usage.services import KnownCard, price_card_known

logger = logging.getLogger(__name__)

BUDGET_EXCEEDED = "budget_exceeded"
UNPRICED_REFUSED = "unpriced_refused"


class BudgetExceeded(Exception):
    """The request could cost more than what remains; the message says how much of which budget."""

    code = BUDGET_EXCEEDED


class UnpricedRefused(BudgetExceeded):
    """A budget applies and the model has no price card that day: its cost could not be counted."""

    code = UNPRICED_REFUSED


@dataclass(frozen=True)
class Reservation:
    id: int
    amount: Decimal


# --- months --------------------------------------------------------------------------------------


def team_zone(team: Team) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(team.time_zone or "UTC")
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return zoneinfo.ZoneInfo("UTC")


def budget_month(team: Team, *, now: dt.datetime | None = None) -> dt.date:
    """The first day of the team's current month, in its own time zone."""
    local = (now or timezone.now()).astimezone(team_zone(team))
    return local.date().replace(day=1)


def month_bounds(team: Team, month: dt.date) -> tuple[dt.datetime, dt.datetime]:
    """[start, end) of `month` as aware datetimes in the team's zone."""
    zone = team_zone(team)
    start = dt.datetime.combine(month, dt.time.min, tzinfo=zone)
    following = (month.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    return start, dt.datetime.combine(following, dt.time.min, tzinfo=zone)


# --- worst case ----------------------------------------------------------------------------------


def request_max_tokens(request: ChatRequest) -> int:
    """The output tokens a request may produce: its max_tokens, else the documented default cap."""
    for value in (
        request.max_tokens,
        request.parameters.get("max_tokens"),
        request.parameters.get("max_completion_tokens"),
    ):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return int(settings.BUDGET_DEFAULT_MAX_TOKENS)


def request_worst_case_cost(
    *, request: ChatRequest, team_id: int, model_id: str, card: KnownCard | None = None
) -> Decimal:
    """Prompt estimate x input price + max tokens x output price (zero for an unpriced model).

    `card`: the card that will price the record, when the caller has looked it up already (a
    batch submission reserves its items' worst cases by one card); otherwise today's.
    """
    known = card or price_card_known(model_id=model_id, day=timezone.now().date(), team_id=team_id)
    if known.card is None:
        return ZERO
    prompt = Decimal(estimate_tokens(request.prompt_chars)) * known.card.input_per_m
    output = Decimal(request_max_tokens(request)) * known.card.output_per_m
    return (prompt + output) / PER_MILLION


# --- reserve and reconcile -----------------------------------------------------------------------


def budget_reserve_for_request(
    *, request: ChatRequest, team_id: int, user_id: int | None, card: KnownCard, label: str = ""
) -> Reservation:
    """Reserve a request's worst case by `card`, the one that will price its record; raises
    `BudgetExceeded` (or `UnpricedRefused`) with the refusal message."""
    amount = request_worst_case_cost(request=request, team_id=team_id, model_id=card.model_id, card=card)
    return budget_reserve(team_id=team_id, user_id=user_id, amount=amount, card=card, label=label)


def budget_reserve(
    *, team_id: int, user_id: int | None, amount: Decimal, card: KnownCard, label: str = ""
) -> Reservation:
    """Hold `amount` on the team's (and the member's) ledger of this month, or refuse.

    For a batch chunk sent as one upstream request, `amount` is the sum of its items'
    worst cases and `card` the one card that prices them all. Every reservation must end in
    `budget_reconcile` (with 0 when nothing ran). Raises `BudgetExceeded` when the team's or
    the member's remaining budget is smaller, `UnpricedRefused` when `card` found no card and
    a budget applies that the team did not open to unpriced requests.
    """
    team = Team.objects.get(pk=team_id)
    month = budget_month(team)
    budget_reservations_sweep(team_id=team_id)
    team_limit, allow_unpriced = (
        TeamBudget.objects.filter(team_id=team_id).values_list("monthly_limit_usd", "allow_unpriced").first()
    ) or (None, False)
    member_limit = (
        Membership.objects.filter(team_id=team_id, user_id=user_id)
        .values_list("monthly_budget_usd", flat=True)
        .first()
        if user_id is not None
        else None
    )
    if card.card is None and not allow_unpriced and (team_limit is not None or member_limit is not None):
        whose = "the team's" if team_limit is not None else "your"
        raise UnpricedRefused(_unpriced_refusal(card, whose=whose))
    team_ledger = _ledger(team=team, user_id=None, month=month)
    member_ledger = _ledger(team=team, user_id=user_id, month=month) if user_id is not None else None
    with transaction.atomic():
        if not _hold(team_ledger, amount, team_limit):
            raise BudgetExceeded(_refusal(team_ledger, amount, team_limit, whose="the team's"))
        if member_ledger is not None and not _hold(member_ledger, amount, member_limit):
            # leaving the block with the exception rolls back the team's hold as well
            raise BudgetExceeded(_refusal(member_ledger, amount, member_limit, whose="your"))
        reservation = BudgetReservation.objects.create(
            team_id=team_id,
            team_ledger=team_ledger,
            member_ledger=member_ledger,
            amount_usd=amount,
            label=label[:120],
        )
    return Reservation(id=reservation.pk, amount=amount)


def budget_reconcile(*, reservation: Reservation, actual: Decimal) -> bool:
    """Replace the hold by what the request really cost; once (a second call does nothing).

    Returns whether this call settled it. Checks the team's alert thresholds afterwards.
    """
    with transaction.atomic():
        settled = BudgetReservation.objects.filter(pk=reservation.id, settled_at__isnull=True).update(
            settled_at=timezone.now(), actual_usd=actual
        )
        if not settled:
            return False
        row = BudgetReservation.objects.get(pk=reservation.id)
        ledger_ids = [row.team_ledger_id, *([row.member_ledger_id] if row.member_ledger_id else [])]
        BudgetLedger.objects.filter(pk__in=ledger_ids).update(
            reserved_usd=F("reserved_usd") - row.amount_usd, spent_usd=F("spent_usd") + actual
        )
    try:
        budget_alerts_check(ledger_id=row.team_ledger_id)
    except Exception:  # an alert that fails to send must not undo the accounting
        logger.exception("budget alert check failed")
    return True


def budget_release(*, reservation: Reservation) -> bool:
    """Give a reservation back whole: the request was never sent (for batch chunks)."""
    return budget_reconcile(reservation=reservation, actual=ZERO)


def record_cost_for_budget(record: UsageRecord | None, reservation: Reservation) -> Decimal:
    """What a finished request counts against the budget: its record's cost, or, when no full
    record could be written (its cost is unknown), the reserved worst case."""
    if record is None or record.error_code == "record_write_failed":
        return reservation.amount
    return Decimal(record.total_cost)


def budget_reservations_sweep(*, team_id: int | None = None) -> int:
    """Release reservations older than `BUDGET_RESERVATION_TTL` seconds whose process died
    before reconciling them (nothing else would ever give them back)."""
    cutoff = timezone.now() - dt.timedelta(seconds=settings.BUDGET_RESERVATION_TTL)
    stale = BudgetReservation.objects.filter(settled_at__isnull=True, created_at__lt=cutoff)
    if team_id is not None:
        stale = stale.filter(team_id=team_id)
    released = 0
    for reservation_id, amount in stale.values_list("id", "amount_usd")[:100]:
        logger.warning("releasing budget reservation %s: never reconciled", reservation_id)
        released += budget_release(reservation=Reservation(id=reservation_id, amount=amount))
    return released


def _ledger(*, team: Team, user_id: int | None, month: dt.date) -> BudgetLedger:
    """The ledger row of the month, created with what the month's records already cost."""
    scope: dict[str, Any] = {"user_id": user_id} if user_id is not None else {"user__isnull": True}
    ledger = BudgetLedger.objects.filter(team=team, month=month, **scope).first()
    if ledger is not None:
        return ledger
    start, end = month_bounds(team, month)
    records = UsageRecord.objects.filter(team=team, created_at__gte=start, created_at__lt=end)
    if user_id is not None:
        records = records.filter(user_id=user_id)
    spent = records.aggregate(total=Sum("total_cost"))["total"] or ZERO
    try:
        with transaction.atomic():
            return BudgetLedger.objects.create(team=team, user_id=user_id, month=month, spent_usd=spent)
    except IntegrityError:  # another request created it first
        return BudgetLedger.objects.get(team=team, month=month, **scope)


def _hold(ledger: BudgetLedger, amount: Decimal, limit: Decimal | None) -> bool:
    """The one conditional UPDATE: raise `reserved` only if the limit still covers it."""
    rows = BudgetLedger.objects.filter(pk=ledger.pk)
    if limit is not None:
        rows = rows.filter(spent_usd__lte=Decimal(limit) - amount - F("reserved_usd"))
    return rows.update(reserved_usd=F("reserved_usd") + amount) == 1


def _refusal(ledger: BudgetLedger, amount: Decimal, limit: Decimal | None, *, whose: str) -> str:
    ledger.refresh_from_db()
    remaining = max(ZERO, Decimal(limit or 0) - ledger.spent_usd - ledger.reserved_usd)
    return (
        f"This request could cost up to {usd_text(amount)}; {usd_text(remaining)} of {whose} "
        f"{usd_text(Decimal(limit or 0))} budget remains this month."
    )


def _unpriced_refusal(card: KnownCard, *, whose: str) -> str:
    return (
        f"{card.model_id} has no price card for {card.day.isoformat()}, so {whose} budget cannot "
        "count what this request would cost: nothing was sent. Set a price on the Catalogue page "
        "(a team price override is enough), or an owner can allow unpriced requests on the Budgets page."
    )


def usd_text(amount: Decimal) -> str:
    """Dollars for budget messages: cents from a cent up, else enough digits to be non-zero."""
    if amount >= Decimal("0.01") or amount == 0:
        return f"${amount:,.2f}"
    return "$" + f"{amount:.6f}".rstrip("0")


# --- alerts and status ---------------------------------------------------------------------------


def budget_alerts_check(*, ledger_id: int) -> list[int]:
    """Record (and email once) every alert threshold the team's spend crossed this month."""
    ledger = BudgetLedger.objects.select_related("team").get(pk=ledger_id)
    budget = TeamBudget.objects.filter(team_id=ledger.team_id).first()
    if budget is None or not budget.monthly_limit_usd:
        return []
    percent = ledger.spent_usd * 100 / budget.monthly_limit_usd
    crossed = []
    for threshold in sorted(budget.alert_thresholds or []):
        if percent < threshold:
            continue
        try:
            with transaction.atomic():
                alert = BudgetAlert.objects.create(
                    team_id=ledger.team_id, month=ledger.month, threshold=threshold
                )
        except IntegrityError:
            continue  # already raised (and emailed) this month
        crossed.append(threshold)
        _alert_email(alert=alert, team=ledger.team, limit=budget.monthly_limit_usd, spent=ledger.spent_usd)
    return crossed


def _alert_email(*, alert: BudgetAlert, team: Team, limit: Decimal, spent: Decimal) -> None:
    recipients = list(
        Membership.objects.filter(team=team, role__in=ROLES_THAT_CAN_MANAGE)
        .exclude(user__email="")
        .values_list("user__email", flat=True)
    )
    if recipients:
        message = EmailMessage(
            subject=f"{team.name} has used {alert.threshold}% of its monthly budget",
            body=(
                f"{team.name} has spent {usd_text(spent)} of its {usd_text(limit)} budget for "
                f"{alert.month:%B %Y} ({alert.threshold}% alert).\n"
            ),
            to=recipients,
        )
        try:
            message.send()
        except Exception:  # the banner still shows it; the next threshold tries again
            logger.exception("could not email the %s%% budget alert of team %s", alert.threshold, team.pk)
            return
    BudgetAlert.objects.filter(pk=alert.pk).update(emailed_at=timezone.now())


@dataclass(frozen=True)
class BudgetStatus:
    month: dt.date
    limit: Decimal | None
    spent: Decimal
    reserved: Decimal
    forecast: Decimal
    thresholds: list[int]
    crossed: list[int]

    @property
    def remaining(self) -> Decimal | None:
        return None if self.limit is None else max(ZERO, self.limit - self.spent - self.reserved)

    @property
    def percent_used(self) -> int | None:
        return None if not self.limit else int(self.spent * 100 / self.limit)


def budget_status(*, team: Team, now: dt.datetime | None = None) -> BudgetStatus:
    """This month's figures for the budgets page and the banner (reads only)."""
    now = now or timezone.now()
    month = budget_month(team, now=now)
    ledger = BudgetLedger.objects.filter(team=team, user__isnull=True, month=month).first()
    if ledger is not None:
        spent, reserved = ledger.spent_usd, ledger.reserved_usd
    else:
        start, end = month_bounds(team, month)
        records = UsageRecord.objects.filter(team=team, created_at__gte=start, created_at__lt=end)
        spent, reserved = records.aggregate(total=Sum("total_cost"))["total"] or ZERO, ZERO
    budget = TeamBudget.objects.filter(team=team).first()
    return BudgetStatus(
        month=month,
        limit=budget.monthly_limit_usd if budget else None,
        spent=spent,
        reserved=reserved,
        forecast=month_end_forecast(team=team, spent=spent, now=now),
        thresholds=list(budget.alert_thresholds) if budget else [],
        crossed=list(
            BudgetAlert.objects.filter(team=team, month=month)
            .order_by("threshold")
            .values_list("threshold", flat=True)
        ),
    )


def month_end_forecast(*, team: Team, spent: Decimal, now: dt.datetime) -> Decimal:
    """Spend so far scaled to the whole month at the same rate (time elapsed in the team's zone)."""
    start, end = month_bounds(team, budget_month(team, now=now))
    elapsed = (now - start).total_seconds()
    if elapsed <= 0:
        return spent
    return spent * Decimal((end - start).total_seconds()) / Decimal(elapsed)


def member_spend(*, team: Team, month: dt.date) -> dict[int, Decimal]:
    """Each member's spend in `month` (ledgers where they exist, else their records)."""
    start, end = month_bounds(team, month)
    rows = (
        UsageRecord.objects.filter(team=team, created_at__gte=start, created_at__lt=end, user__isnull=False)
        .values("user_id")
        .annotate(total=Sum("total_cost"))
    )
    spend = {row["user_id"]: row["total"] or ZERO for row in rows}
    for ledger in BudgetLedger.objects.filter(team=team, month=month, user__isnull=False):
        spend[ledger.user_id] = ledger.spent_usd  # type: ignore[index]
    return spend
