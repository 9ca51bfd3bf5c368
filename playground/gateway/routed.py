"""A gateway request steered by the team's routing policy: one retry loop for the whole request.

The plan (`routing.resolve`) gives the targets in order; each attempt is one metered call with
its own usage record (`usage.calls.kinds.gateway_call`): the first held at admission, a later
one holding its budget as it starts, at the price of the target it calls. After a failure the
plan moves on (`on`: statuses, "timeout", "connect_error") to the next target at once, and
comes back round to the first ones after a backoff (`Retry-After` when the upstream says, up
to `max_retry_after_s`; a longer wait moves on instead), `retries.attempts` in all. A budget
that cannot cover a target sends the request to the rule's `when_budget_cannot_cover` target
(a downgrade) or ends it. Nothing is retried once a byte reached the client. Every attempt's
record carries the decision so far (`RouteRecord`); the last one's lists every attempt.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, replace
from typing import Any

from playground.providers.events import UpstreamError
from playground.routing.cooldown import target_succeeded
from playground.routing.plan import CONNECT_ERROR, TIMEOUT, RoutePlan, Target
from playground.routing.sticky import sticky_keep
from playground.usage.calls.context import RouteRecord

logger = logging.getLogger(__name__)

BUDGET = "budget"
# One generator for every backoff's jitter: seeding a new one per request read the OS's entropy
# (about 14 µs, more than the rest of a routed request's bookkeeping); safe to share.
_JITTER = random.Random()


@dataclass(frozen=True)
class Attempt:
    target: Target
    request_id: str
    status: int | str | None  # the HTTP status, "timeout", "connect_error", "budget"; None: pending
    ms: int
    moved_on: str  # why the next attempt followed ("" for the last)

    def stored(self) -> dict[str, Any]:
        return {
            "target": self.target.label,
            "request_id": self.request_id,
            "status": self.status,
            "ms": self.ms,
            "moved_on": self.moved_on,
        }


@dataclass(frozen=True)
class Next:
    """The attempt to make next: its target, after `delay` seconds; `downgrade` when it is the
    budget's fallback."""

    target: Target
    delay: float
    downgrade: bool = False


def failure_kind(error: UpstreamError) -> int | str | None:
    """What the plan's `on` is matched against: the HTTP status, a timeout before the first byte,
    an upstream that could not be reached; None for a failure no fallback can help (a stream
    that could not be read)."""
    if error.http_status is not None:
        return error.http_status
    if error.is_timeout:
        return TIMEOUT
    if error.code == "connection_error":
        return CONNECT_ERROR
    return None


class RoutedRequest:
    """The attempts of one routed request, and the decision after each."""

    def __init__(
        self,
        plan: RoutePlan,
        *,
        session: str = "",
        session_inferred: bool = False,
        affinity_added: bool,
        failing: set[Target] | None = None,
        sticky_was: Target | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.plan = plan
        # The session its affinity key and stickiness follow: the one the client named, or one
        # inferred from its messages (`routing.session_infer`); "" for none.
        self.session, self.session_inferred = session, session_inferred
        self.affinity_added = affinity_added
        # Targets with failures counted when the request was admitted (its success forgets
        # them), and the target its session stuck to then: a success writes only what changed.
        self.failing = failing or set()
        self.sticky_was = sticky_was
        self.rng = rng or _JITTER
        self.attempts: list[Attempt] = []
        self.target = plan.targets[0]
        self.position = 0  # of `target` in the plan's order
        self.downgraded = plan.downgrade is not None
        self.downgrade_reason = plan.downgrade.reason if plan.downgrade is not None else ""
        self.requested = plan.downgrade.requested if plan.downgrade is not None else None
        self._started = time.perf_counter()

    def begin(self, request_id: str) -> RouteRecord:
        """An attempt starts on `target`: the record it will write unless it fails."""
        self._started = time.perf_counter()
        self.attempts.append(Attempt(self.target, request_id, None, 0, ""))
        return self.record(final=True)

    def end(self, status: int | str | None, moved_on: str) -> RouteRecord:
        """The current attempt ended (`moved_on` empty: the request ends with it)."""
        ms = round((time.perf_counter() - self._started) * 1000)
        self.attempts[-1] = replace(self.attempts[-1], status=status, ms=ms, moved_on=moved_on)
        return self.record(final=not moved_on)

    def after_failure(self, error: UpstreamError, *, refused: bool) -> Next | None:
        """Where the request goes after the current attempt failed, or None (it ends here)."""
        if len(self.attempts) >= self.plan.retries.attempts:
            return None
        if refused:
            fallback = self.plan.budget_fallback
            if fallback is None or fallback == self.target:
                return None
            return Next(fallback, 0.0, downgrade=True)
        kind = failure_kind(error)
        if kind is None or kind not in self.plan.on:
            return None
        targets = self.plan.targets
        later = self.position + 1 < len(targets)
        if later:
            return Next(targets[self.position + 1], 0.0)
        wait = self._backoff(error)
        if wait is None:
            return None
        return Next(targets[0], wait)

    def move(self, step: Next) -> None:
        if step.downgrade:
            self.downgraded, self.downgrade_reason = True, "budget_cannot_cover"
            self.requested = self.requested or self.target
        self.target = step.target
        self.position = (
            self.plan.targets.index(step.target) if step.target in self.plan.targets else self.position
        )

    def _backoff(self, error: UpstreamError) -> float | None:
        """The wait before coming back round to a target that failed: its `Retry-After`, capped
        (a longer wait ends the request: its last error says how long to wait), else exponential
        with full jitter."""
        retries = self.plan.retries
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= retries.max_retry_after_s else None
        ceiling = retries.backoff_ms / 1000 * 2 ** (len(self.attempts) - 1)
        return min(retries.max_retry_after_s, self.rng.uniform(ceiling / 2, ceiling))

    @property
    def fell_back(self) -> bool:
        return self.target != self.plan.targets[0]

    def record(self, *, final: bool) -> RouteRecord:
        detail: dict[str, Any] = {
            "policy_version": self.plan.policy_version,
            "rule": self.plan.rule,
            "attempt": len(self.attempts),
            "attempts": [attempt.stored() for attempt in self.attempts],
            "final": self.target.label if final else None,
            "requested_model": self.plan.requested_model,
            "downgrade": (
                {
                    "reason": self.downgrade_reason,
                    "requested": self.requested.label if self.requested else None,
                    # What the money a downgrade moved is priced by (the dashboard's "moved").
                    "requested_model_id": self.requested.model if self.requested else None,
                }
                if self.downgraded
                else None
            ),
            "affinity_added": self.affinity_added,
            "session_inferred": self.session_inferred,
        }
        return RouteRecord(
            rule=self.plan.rule, fell_back=self.fell_back, downgraded=self.downgraded, detail=detail
        )

    def headers(self) -> dict[str, str]:
        """`x-playground-route` (when a rule matched), `-attempts` and `-model-used`."""
        headers = {
            "x-playground-attempts": str(len(self.attempts)),
            "x-playground-model-used": self.target.label,
        }
        if self.plan.rule:
            headers["x-playground-route"] = self.plan.rule
        return headers


_after_success: set[asyncio.Task[None]] = set()


def routed_success(routed: RoutedRequest, team_id: int) -> None:
    """The target answered: its failures are forgotten, and a sticky session keeps it. Only what
    changed is written (most requests: nothing), in a task of its own: off the answer's path,
    and not cancelled with the relay when the client, answered, hangs up."""
    session = routed.session
    forget = routed.target in routed.failing or len(routed.attempts) > 1
    keep = routed.plan.sticky and bool(session) and routed.sticky_was != routed.target
    if not forget and not keep:
        return
    task = asyncio.ensure_future(
        _remember_success(routed.target, team_id, session if keep else "", forget=forget)
    )
    _after_success.add(task)
    task.add_done_callback(_after_success.discard)


async def _remember_success(target: Target, team_id: int, session: str, *, forget: bool) -> None:
    try:
        if forget:
            await target_succeeded(target)
        if session:
            await sticky_keep(team_id, session, target)
    except Exception:
        logger.exception("a routed request's success could not be kept (cooldown, sticky session)")
