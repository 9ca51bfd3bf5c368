"""What a team's routing policy decided for one request: the targets to try, in order, and how.

`routing.resolve` builds a `RoutePlan` from the policy in force and the request's facts; the
gateway carries it out (one metered call per attempt, `gateway.routed`). Values only: no
database, no I/O, so a plan can be built in a test or printed by a dry run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# What makes a fallback policy move on to its next target: upstream HTTP statuses, plus these.
TIMEOUT = "timeout"  # no first byte within the connection's timeout
CONNECT_ERROR = "connect_error"  # the upstream could not be reached
DEFAULT_ON: frozenset[int | str] = frozenset({429, 500, 502, 503, 504, TIMEOUT, CONNECT_ERROR})


@dataclass(frozen=True)
class Target:
    """One connection and the model id sent to it (a model's id may differ per connection)."""

    connection_id: int
    connection_name: str
    model: str

    @property
    def label(self) -> str:
        """`connection/model`, as the `x-playground-model-used` header and the record say it."""
        return f"{self.connection_name}/{self.model}"


@dataclass(frozen=True)
class Retries:
    """One retry loop for the whole request: `attempts` in all (every target counted), exponential
    backoff with jitter from `backoff_ms`, and a `Retry-After` honoured up to `max_retry_after_s`."""

    attempts: int = 3
    backoff_ms: int = 200
    max_retry_after_s: float = 10.0


@dataclass(frozen=True)
class Cooldown:
    """A target that failed `failures` times in a row is skipped for `seconds` (all processes)."""

    failures: int = 3
    seconds: float = 30.0


@dataclass(frozen=True)
class Downgrade:
    """Why the plan does not call what was asked for: `budget_used_above` matched, or the budget
    could not cover the requested target (`when_budget_cannot_cover`)."""

    reason: str  # "budget_used_above" | "budget_cannot_cover"
    requested: Target | None  # what the request would have called (for the money it moved)


@dataclass(frozen=True)
class RoutePlan:
    """The decision for one request, before any attempt.

    `targets` are in the order to try (a weighted group already reduced to the one it picked,
    nested groups flattened); a `single` or `weighted` rule has one. `on` says which failures
    move on to the next target; anything else ends the request. `budget_fallback` is called
    instead of refusing when the budget cannot cover a target (the rule's
    `when_budget_cannot_cover`)."""

    policy_version: int | None  # None: no policy, the key's own connection
    rule: str  # the matching rule's name; "" when none matched
    targets: tuple[Target, ...]
    on: frozenset[int | str] = DEFAULT_ON
    retries: Retries = field(default_factory=Retries)
    cooldown: Cooldown = field(default_factory=Cooldown)
    downgrade: Downgrade | None = None
    budget_fallback: Target | None = None
    requested_model: str = ""  # the model the client sent (an alias, say)
    sticky: bool = False  # the session's later requests go to the target this one used
    auto_affinity: bool = True  # add an affinity key derived from team and session when none is sent


@dataclass(frozen=True)
class RequestFacts:
    """What a rule's `when` can look at, read from the request before anything is sent."""

    model: str  # as the client sent it (an alias, maybe)
    tags: tuple[str, ...] = ()
    metadata: dict[str, object] | None = None
    end_user: str = ""
    session: str = ""
    prompt_tokens: int = 0  # estimated from the body
    stream: bool = False
