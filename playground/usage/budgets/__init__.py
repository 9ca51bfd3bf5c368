"""Monthly budgets: reserve a request's worst case before it is sent, reconcile it after.

Every upstream request goes through `MeteredCall` (`usage.calls`), which holds its budget with
`budget_reserve_for_requests` before sending (with the requests admitted together, for the
gateway) and calls `budget_reconcile` in the shielded step that writes the usage record, so chat
turns, tool continuations, compare columns, batch items and the gateway all hold the same budget. A batch that
sends a chunk of items in one upstream request (the queue path) reserves the chunk's worst
case with `budget_reserve` and reconciles it with `budget_reconcile` once its records exist.

The package, by idea: `months` (a team's budget month), `worst_case` (what a request may
cost), `ledger` (the rows and the one conditional UPDATE that holds money), `admission`
(reserve or refuse), `settlement` (reconcile, release, the sweep), `alerts` (thresholds and
their e-mail) and `status` (the figures pages show).
Dollars in their messages are written by `playground.usage.money`.
"""

from __future__ import annotations

from playground.usage.budgets.admission import (
    BUDGET_EXCEEDED,
    UNPRICED_REFUSED,
    BudgetExceeded,
    BudgetRequest,
    KeyBudget,
    UnpricedRefused,
    budget_reserve,
    budget_reserve_for_requests,
)
from playground.usage.budgets.ledger import Reservation
from playground.usage.budgets.months import budget_month
from playground.usage.budgets.settlement import (
    budget_alerts_after,
    budget_reconcile,
    budget_reservations_sweep,
    budget_settle_many,
    record_cost_for_budget,
)
from playground.usage.budgets.status import (
    BudgetStatus,
    Headroom,
    budget_headroom,
    budget_status,
    key_spend,
    member_spend,
)
from playground.usage.budgets.worst_case import request_worst_case_cost

__all__ = [
    "BUDGET_EXCEEDED",
    "UNPRICED_REFUSED",
    "BudgetExceeded",
    "BudgetRequest",
    "BudgetStatus",
    "Headroom",
    "KeyBudget",
    "Reservation",
    "UnpricedRefused",
    "budget_alerts_after",
    "budget_headroom",
    "budget_month",
    "budget_reconcile",
    "budget_reservations_sweep",
    "budget_reserve",
    "budget_reserve_for_requests",
    "budget_settle_many",
    "budget_status",
    "key_spend",
    "member_spend",
    "record_cost_for_budget",
    "request_worst_case_cost",
]
