"""Who holds a call's budget, and when: a value the call is built with, and the hold's state.

Three ways, each a value rather than a combination of flags:
- `HoldOnSend`: the call holds its budget itself as `events()` starts (chat turns, tool
  continuations, compare columns), in a worker thread, shielded from cancellation;
- `HoldAtAdmission`: the step that admitted the call holds it first (`calls_hold_together`,
  the gateway's admission, in the worker thread it already runs in, for the requests
  admitted together), so `events()` sends at once or reports the refusal; a call admitted
  but never started is given back with `MeteredCall.abandon()`;
- `HeldByCaller`: the caller holds it and settles it (a batch chunk sent to a queue reserves
  all its items at once, `budgets.budget_reserve`, and reconciles the chunk itself): the call
  neither holds nor settles any budget, and replaying a queued result is never refused.

Whichever holds it, the team's, the member's and (for a gateway key) the key's own budgets are
held by one path, `budgets.budget_reserve_for_requests`, priced by the card the record will use.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from playground.usage.budgets import (
    BudgetExceeded,
    BudgetRequest,
    KeyBudget,
    Reservation,
    budget_reserve_for_requests,
)
from playground.usage.calls.upstream import NOT_SENT, calls_redact_upstream
from playground.usage.records import request_price_card
from playground.usage.storage import REDACTOR_ERROR

if TYPE_CHECKING:
    from playground.usage.calls.call import MeteredCall

logger = logging.getLogger(__name__)

BUDGET_UNCHECKED = "Nothing was sent: the team's budget could not be checked. Try again in a moment."
BUDGET_UNCHECKED_CODE = "budget_unchecked"


@dataclass(frozen=True)
class HoldOnSend:
    """The call holds its budget as `events()` starts."""

    key: KeyBudget | None = None  # an API key whose own budget is held with the team's and the member's


@dataclass(frozen=True)
class HoldAtAdmission:
    """Held by the admission step (`calls_hold_together`) before `events()`; `events()` refuses to
    start a call that was not."""

    key: KeyBudget | None = None


@dataclass(frozen=True)
class HeldByCaller:
    """The caller holds and settles the budget; the call does neither."""


type BudgetHold = HoldOnSend | HoldAtAdmission | HeldByCaller


@dataclass(frozen=True)
class Held:
    """The budget is held: by this call (`reservation`, settled with its record), or by its caller (None)."""

    reservation: Reservation | None


@dataclass(frozen=True)
class Refused:
    """Nothing may be sent: the budget is spent, the model unpriced, or the budget unreadable
    (it fails closed)."""

    reason: str
    code: str


type HoldState = Held | Refused | None  # None: not held yet


def calls_hold_together(calls: Sequence[MeteredCall]) -> None:
    """Hold the budgets of `calls` not held yet (each one's `hold` becomes `Held` or `Refused`).

    Calls admitted together (the gateway's, issue 24) are each held or refused exactly as if held
    alone, in order, with the statements of one admission when the budgets cover them all
    (`budgets.budget_reserve_for_requests`). Each call's card is looked up once, here, and kept
    in its context: the hold and the record are priced by the same one. Before that, the
    requests of a team that sends placeholders upstream are redacted (`calls.upstream`). Blocking."""
    todo = []
    for call in calls:
        if call.hold is not None:
            continue
        if isinstance(call.budget, HeldByCaller):
            call.hold = Held(None)
        else:
            todo.append(call)
    if not todo:
        return
    try:
        # What goes upstream is redacted here, before the hold, when the team says so (`calls.upstream`).
        for call in calls_redact_upstream(todo):
            call.hold = Refused(NOT_SENT, REDACTOR_ERROR)
        todo = [call for call in todo if call.hold is None]
        requests = []
        for call in todo:
            card = request_price_card(context=call.context)
            call.context = replace(call.context, price_card=card)
            assert not isinstance(call.budget, HeldByCaller)
            requests.append(
                BudgetRequest(
                    request=call.request,
                    team_id=call.context.team_id,
                    user_id=call.context.user_id,
                    card=card,
                    label=call.context.source or call.context.path,
                    key=call.budget.key,
                )
            )
        outcomes = budget_reserve_for_requests(requests)
    except Exception:
        for call in todo:
            logger.exception("the budget of a %s request could not be checked", call.context.path)
            call.hold = Refused(BUDGET_UNCHECKED, BUDGET_UNCHECKED_CODE)
        return
    for call, outcome in zip(todo, outcomes, strict=True):
        if isinstance(outcome, BudgetExceeded):
            call.hold = Refused(str(outcome), outcome.code)
        else:
            call.hold = Held(outcome)
