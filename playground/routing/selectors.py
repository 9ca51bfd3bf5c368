"""Reading routing policies: the versions for the page and the command, and for the gateway
the policy in force, parsed, from a per-process cache.

The cache: a team's compiled policy is read at most once per `POLICY_TTL_SECONDS` per process
(one dict look-up otherwise, a few microseconds: benchmarks/gateway_overhead.py's routed case).
Saving a version, or changing a connection, drops this process's copy at once; other processes
(web workers) see it within the TTL.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet
from django.db.models.signals import post_delete, post_save

from playground.accounts.models import Membership, Team
from playground.providers.models import ProviderConnection
from playground.routing.document import Policy, policy_parse
from playground.routing.models import RoutingPolicy
from playground.routing.plan import Target
from playground.routing.problems import PolicyProblem
from playground.routing.validation import document_target_paths
from playground.usage.budgets.months import budget_month
from playground.usage.models import BudgetLedger, TeamBudget

POLICY_TTL_SECONDS = 2.0


@dataclass(frozen=True)
class TeamRouting:
    """A team's policy in force, parsed, with its connections by name (as the document names them)."""

    version: int
    policy: Policy
    connections: dict[str, Target]  # name -> the connection's id and name (model left blank)


def routing_policy_current(team_id: int) -> RoutingPolicy | None:
    return RoutingPolicy.objects.filter(team_id=team_id).select_related("created_by").first()


def routing_policy_versions(team_id: int) -> QuerySet[RoutingPolicy]:
    return RoutingPolicy.objects.filter(team_id=team_id).select_related("created_by").order_by("-version")


_cache: dict[int, tuple[float, TeamRouting | None]] = {}
_cache_lock = threading.Lock()


def team_routing(team_id: int) -> TeamRouting | None:
    """The policy in force for the gateway (None: the team has none). Blocking on a miss."""
    now = time.monotonic()
    cached = _cache.get(team_id)
    if cached is not None and cached[0] > now:
        return cached[1]
    routing = _team_routing_read(team_id)
    with _cache_lock:
        _cache[team_id] = (now + POLICY_TTL_SECONDS, routing)
    return routing


def _team_routing_read(team_id: int) -> TeamRouting | None:
    current = RoutingPolicy.objects.filter(team_id=team_id).only("version", "document").first()
    if current is None:
        return None
    connections = {
        name: Target(connection_id=pk, connection_name=name, model="")
        for pk, name in ProviderConnection.objects.filter(team_id=team_id).values_list("pk", "name")
    }
    return TeamRouting(
        version=current.version, policy=policy_parse(current.document), connections=connections
    )


def policy_cache_forget(team_id: int | None = None) -> None:
    """Drop this process's copy of a team's policy (all teams: None)."""
    with _cache_lock:
        if team_id is None:
            _cache.clear()
        else:
            _cache.pop(team_id, None)


def _connection_changed(instance: ProviderConnection, **_: Any) -> None:
    policy_cache_forget(instance.team_id)


post_save.connect(_connection_changed, sender=ProviderConnection, dispatch_uid="routing-connection-saved")
post_delete.connect(_connection_changed, sender=ProviderConnection, dispatch_uid="routing-connection-deleted")


def routing_policy_flags(team_id: int) -> list[PolicyProblem]:
    """What is wrong with the version in force now: each target whose connection was deleted or
    renamed since it was saved, at its path (its requests are refused until the policy changes)."""
    current = routing_policy_current(team_id)
    if current is None:
        return []
    names = set(ProviderConnection.objects.filter(team_id=team_id).values_list("name", flat=True))
    return [
        PolicyProblem(
            f"{at.path}.connection",
            f"{at.owner} names the connection {at.ref['connection']!r}, which "
            "no longer exists: its requests are answered 503 until the policy is changed.",
        )
        for at in document_target_paths(current.document)
        if at.ref["connection"] not in names
    ]


def routing_budget_used(
    *, team_id: int, key_id: int | None, key_limit: Decimal | None, user_id: int | None = None
) -> float | None:
    """The share (0..1+) of the tightest monthly budget spent or held so far: the team's, the
    key's own and the member's (`user_id`, whose requests the key's are, as the budget counts
    them); None when none has a limit. At most three small reads, made only for a policy with a
    `budget_used_above` rule."""
    team = Team.objects.get(pk=team_id)
    team_limit = (
        TeamBudget.objects.filter(team_id=team_id).values_list("monthly_limit_usd", flat=True).first()
    )
    member_limit = (
        Membership.objects.filter(team_id=team_id, user_id=user_id)
        .values_list("monthly_budget_usd", flat=True)
        .first()
        if user_id is not None
        else None
    )
    key_limit = key_limit if key_id is not None else None
    if not team_limit and not key_limit and not member_limit:
        return None
    ledgers = BudgetLedger.objects.filter(team_id=team_id, month=budget_month(team))
    shares = []
    if team_limit:
        shares += [
            _share(ledger, team_limit) for ledger in ledgers.filter(user__isnull=True, api_key__isnull=True)
        ]
    if key_limit:
        shares += [
            _share(ledger, key_limit) for ledger in ledgers.filter(user__isnull=True, api_key_id=key_id)
        ]
    if member_limit and user_id is not None:
        shares += [
            _share(ledger, member_limit) for ledger in ledgers.filter(user_id=user_id, api_key__isnull=True)
        ]
    return float(max(shares)) if shares else 0.0


def _share(ledger: BudgetLedger, limit: Decimal) -> Decimal:
    return (ledger.spent_usd + ledger.reserved_usd) / limit


def routing_rule_names(team_id: int) -> list[str]:
    """Every rule name the team's policy versions have had, sorted: what records may name."""
    names: set[str] = set()
    for document in RoutingPolicy.objects.filter(team_id=team_id).values_list("document", flat=True):
        names.update(
            rule["name"] for rule in document.get("rules", []) if isinstance(rule, dict) and "name" in rule
        )
    return sorted(names)
