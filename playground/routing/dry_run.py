"""A dry run: what the policy in force would do with a sample request, before any is sent.

The rule that matches, the targets in the order they would be tried with what the sample
would cost at each (the one cost function, each target's own price card), a downgrade, and,
for a sample naming a session with records, what the session would lose in cached tokens if
the request moved off the target its last request used.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

from django.utils import timezone

from playground.providers.usage_normalize import NormalizedUsage
from playground.routing.plan import RequestFacts, RoutePlan, Target
from playground.routing.resolve import plan_make
from playground.routing.selectors import team_routing
from playground.usage.models import UsageRecord
from playground.usage.pricing import cache_miss_cost, cost_for
from playground.usage.records import price_card_known


@dataclass(frozen=True)
class SampleRequest:
    model: str
    tags: tuple[str, ...] = ()
    metadata: dict[str, object] | None = None
    end_user: str = ""
    session: str = ""
    prompt_tokens: int = 1000
    completion_tokens: int = 200
    stream: bool = False
    budget_used: float | None = None  # the share of the month's budget to assume; None: none known


@dataclass(frozen=True)
class TargetEstimate:
    target: Target
    cost: Decimal | None  # None: the target's model has no price card
    price_label: str


@dataclass(frozen=True)
class SessionMove:
    """What moving the session costs: the tokens its last request's prefix held, now fresh."""

    previous: str  # connection/model of the session's last request
    tokens: int
    usd: Decimal


@dataclass(frozen=True)
class DryRun:
    policy_version: int | None
    plan: RoutePlan | None  # None: the team has no policy
    estimates: list[TargetEstimate] = field(default_factory=list)
    budget_fallback: TargetEstimate | None = None
    session_move: SessionMove | None = None


def routing_dry_run(*, team_id: int, default: Target, sample: SampleRequest) -> DryRun:
    """What the policy in force does with `sample`; `default` is where a request no rule matches
    goes (a key's connection). Raises `problems.RouteUnavailable` as a real request would."""
    routing = team_routing(team_id)
    if routing is None:
        return DryRun(policy_version=None, plan=None)
    facts = RequestFacts(
        model=sample.model,
        tags=sample.tags,
        metadata=sample.metadata,
        end_user=sample.end_user,
        session=sample.session,
        prompt_tokens=sample.prompt_tokens,
        stream=sample.stream,
    )
    plan = plan_make(routing, default=default, facts=facts, budget_used=lambda: sample.budget_used)
    day = timezone.now().date()
    return DryRun(
        policy_version=routing.version,
        plan=plan,
        estimates=[_estimate(target, sample, team_id, day) for target in plan.targets],
        budget_fallback=_estimate(plan.budget_fallback, sample, team_id, day)
        if plan.budget_fallback
        else None,
        session_move=_session_move(team_id, sample.session, plan.targets[0], day) if sample.session else None,
    )


def _estimate(target: Target, sample: SampleRequest, team_id: int, day: dt.date) -> TargetEstimate:
    known = price_card_known(model_id=target.model, day=day, team_id=team_id)
    usage = NormalizedUsage(prompt_tokens=sample.prompt_tokens, completion_tokens=sample.completion_tokens)
    cost = cost_for(usage=usage, card=known.card).total if known.card is not None else None
    return TargetEstimate(target=target, cost=cost, price_label=known.label)


def _session_move(team_id: int, session: str, first: Target, day: dt.date) -> SessionMove | None:
    """None when the session has no record, or its last request went where this one would."""
    last = (
        UsageRecord.objects.filter(team_id=team_id, session=session)
        .order_by("-created_at", "-pk")
        .select_related("connection")
        .first()
    )
    if last is None or (last.connection_id, last.model_id) == (first.connection_id, first.model):
        return None
    tokens = last.prompt_tokens + last.completion_tokens  # the prefix its next request would reuse
    card = price_card_known(model_id=first.model, day=day, team_id=team_id).card
    name = last.connection.name if last.connection is not None else "a deleted connection"
    return SessionMove(
        previous=f"{name}/{last.model_id}", tokens=tokens, usd=cache_miss_cost(tokens=tokens, card=card)
    )
