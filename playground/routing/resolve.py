"""The plan a team's policy makes for one request (`plan.RoutePlan`): the first matching rule,
its targets in the order to try, and how to move between them.

Called by the gateway's admission, in its database thread, for a key that follows the team's
policy; cheap (the policy comes from `selectors.team_routing`'s cache; the budget used is read
only when a rule looks at it).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from playground.routing.document import Group, Node, Policy, Rule, TargetRef
from playground.routing.plan import Downgrade, RequestFacts, RoutePlan, Target
from playground.routing.problems import RouteUnavailable
from playground.routing.selectors import TeamRouting, team_routing

type BudgetUsed = Callable[[], float | None]
# One generator for every weighted pick: seeding a new one reads the OS's entropy (about 13 µs,
# a third of a plan's cost); its methods are safe to share between threads.
_RNG = random.Random()


def route_for_request(
    *,
    team_id: int,
    default: Target,
    facts: RequestFacts,
    budget_used: BudgetUsed = lambda: None,
    sticky: Target | None = None,
    cooling: Callable[[Target], bool] = lambda _: False,
    rng: random.Random | None = None,
) -> RoutePlan | None:
    """The plan for a request of a key that follows the team's policy; None: the team has none.

    `default` is the key's own connection with the model the client sent: where a request that
    no rule or alias matches goes. `budget_used` is called only if a rule looks at the budget.
    `sticky` (the target of the session's first request) wins a weighted pick while it is
    not `cooling`; cooling targets go to the back of a fallback order. Raises
    `RouteUnavailable` when the matching rule names a connection that no longer exists."""
    routing = team_routing(team_id)
    if routing is None:
        return None
    return plan_make(
        routing,
        default=default,
        facts=facts,
        budget_used=budget_used,
        sticky=sticky,
        cooling=cooling,
        rng=rng,
    )


def plan_make(
    routing: TeamRouting,
    *,
    default: Target,
    facts: RequestFacts,
    budget_used: BudgetUsed = lambda: None,
    sticky: Target | None = None,
    cooling: Callable[[Target], bool] = lambda _: False,
    rng: random.Random | None = None,
) -> RoutePlan:
    """`route_for_request` for a policy already read (the dry run's entry too)."""
    policy = routing.policy
    used = budget_used() if policy.needs_budget else None
    pick = _Picker(routing, sticky=sticky, cooling=cooling, rng=rng or _RNG)
    rule = _first_match(policy, facts, used)
    if rule is None:
        return RoutePlan(
            policy_version=routing.version,
            rule="",
            targets=_alias_or_default(policy, facts, default, pick),
            retries=policy.retries,
            cooldown=policy.cooldown,
            requested_model=facts.model,
            sticky=policy.sticky_sessions,
            auto_affinity=policy.auto_affinity,
        )
    targets = pick.order(rule)
    downgrade = None
    if rule.when.budget_used_above is not None:
        # What the request would have called had the month not passed the threshold; a rule
        # that sends it there anyway moved nothing, so it is no downgrade.
        unbudgeted = _first_match(policy, facts, None)
        requested = (
            pick.order(unbudgeted)[0]
            if unbudgeted is not None
            else _alias_or_default(policy, facts, default, pick)[0]
        )
        if requested != targets[0]:
            downgrade = Downgrade(reason="budget_used_above", requested=requested)
    return RoutePlan(
        policy_version=routing.version,
        rule=rule.name,
        targets=targets,
        on=rule.on,
        retries=rule.retries or policy.retries,
        cooldown=policy.cooldown,
        downgrade=downgrade,
        budget_fallback=pick.target(rule.name, rule.fallback_on_budget) if rule.fallback_on_budget else None,
        requested_model=facts.model,
        sticky=policy.sticky_sessions,
        auto_affinity=policy.auto_affinity,
    )


def _first_match(policy: Policy, facts: RequestFacts, budget_used: float | None) -> Rule | None:
    return next((rule for rule in policy.rules if _matches(rule, facts, budget_used)), None)


def _matches(rule: Rule, facts: RequestFacts, budget_used: float | None) -> bool:
    when = rule.when
    metadata = facts.metadata or {}
    return (
        (not when.models or facts.model in when.models)
        and (not when.tags_any or bool(set(when.tags_any) & set(facts.tags)))
        and (
            when.metadata is None or all(metadata.get(name) == value for name, value in when.metadata.items())
        )
        and (when.end_user is None or facts.end_user == when.end_user)
        and (when.prompt_tokens_above is None or facts.prompt_tokens > when.prompt_tokens_above)
        and (when.stream is None or facts.stream == when.stream)
        and (
            when.budget_used_above is None
            or (budget_used is not None and budget_used > when.budget_used_above)
        )
    )


def _alias_or_default(
    policy: Policy, facts: RequestFacts, default: Target, pick: _Picker
) -> tuple[Target, ...]:
    refs = policy.aliases.get(facts.model)
    if refs is None:
        return (default,)
    return pick.order_refs(f"alias {facts.model}", refs)


class _Picker:
    """Turns a rule's tree of groups into the order to try: weighted groups pick one, fallback
    groups keep their order with cooling targets at the back, nested groups flatten."""

    def __init__(
        self,
        routing: TeamRouting,
        *,
        sticky: Target | None,
        cooling: Callable[[Target], bool],
        rng: random.Random,
    ) -> None:
        self.routing, self.sticky, self.cooling, self.rng = routing, sticky, cooling, rng

    def order(self, rule: Rule) -> tuple[Target, ...]:
        return _unique(self._node(rule.name, rule.group))

    def order_refs(self, name: str, refs: tuple[TargetRef, ...]) -> tuple[Target, ...]:
        return _unique(self._node(name, Group("fallback", refs)))

    def target(self, rule: str, ref: TargetRef) -> Target:
        connection = self.routing.connections.get(ref.connection)
        if connection is None:
            raise RouteUnavailable(
                rule,
                f"The routing rule {rule!r} names the connection {ref.connection!r}, which no longer exists: "
                "a team admin can change the policy on the team's Routing page.",
            )
        return Target(
            connection_id=connection.connection_id,
            connection_name=connection.connection_name,
            model=ref.model,
        )

    def _node(self, rule: str, node: Node) -> list[Target]:
        if isinstance(node, TargetRef):
            return [self.target(rule, node)]
        if node.strategy == "single":
            return self._node(rule, node.nodes[0])
        if node.strategy == "weighted":
            return self._node(rule, self._weighted(rule, node))
        order = [target for child in node.nodes for target in self._node(rule, child)]
        return [t for t in order if not self.cooling(t)] + [t for t in order if self.cooling(t)]

    def _weighted(self, rule: str, group: Group) -> Node:
        """The sticky target's branch when it is healthy; else a pick by weight among the branches
        that are not all cooling (among all, if every one is)."""
        branches = list(group.nodes)
        if self.sticky is not None and not self.cooling(self.sticky):
            for branch in branches:
                if self.sticky in self._reachable(rule, branch):
                    return branch
        healthy = [
            b for b in branches if not all(self.cooling(t) for t in self._reachable(rule, b))
        ] or branches
        return self.rng.choices(healthy, weights=[b.weight for b in healthy])[0]

    def _reachable(self, rule: str, node: Node) -> list[Target]:
        if isinstance(node, TargetRef):
            return [self.target(rule, node)]
        return [target for child in node.nodes for target in self._reachable(rule, child)]


def _unique(targets: list[Target]) -> tuple[Target, ...]:
    return tuple(dict.fromkeys(targets))
