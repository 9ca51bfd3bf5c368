"""Targets that keep failing are skipped for a while, by every web process alike.

The state is in Django's cache: Redis in production (shared by all web processes), memory
otherwise. A target's consecutive failures are counted; at `Cooldown.failures` it cools for
`Cooldown.seconds` (`routing.resolve` puts it at the back of a fallback order); a success
clears its count. The happy path writes nothing: a request learns at admission whether its
target has failures counted (`target_health`), and only then does its success clear them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.core.cache import cache

from playground.lib.metrics import ROUTING_COOLDOWNS
from playground.routing.plan import Cooldown, Target


def _key(target: Target) -> str:
    return f"routing:cool:{target.connection_id}:{target.model}"


def _failures_key(target: Target) -> str:
    return f"routing:fail:{target.connection_id}:{target.model}"


@dataclass(frozen=True)
class TargetHealth:
    cooling: bool  # skipped to the back of fallback orders until its cooldown ends
    failing: bool  # it has failures counted (a success must forget them)


HEALTH_FRESH_SECONDS = 1.0
_recent: dict[Target, tuple[float, TargetHealth]] = {}


def target_health(target: Target) -> TargetHealth:
    """Whether `target` is cooling down now, and whether it has failures counted: one cache read,
    at most once a second per target and process (what other processes counted is seen within
    the second; what this one counts, at once: `target_failed` and `target_succeeded` drop it)."""
    now = time.monotonic()
    recent = _recent.get(target)
    if recent is not None and recent[0] > now:
        return recent[1]
    found = cache.get_many([_key(target), _failures_key(target)])
    health = TargetHealth(cooling=_key(target) in found, failing=_failures_key(target) in found)
    _recent[target] = (now + HEALTH_FRESH_SECONDS, health)
    return health


async def target_failed(target: Target, cooldown: Cooldown) -> bool:
    """Count a failure; returns whether the target now cools down. The count lives as long as a
    cooldown, so failures far apart never add up to one."""
    _recent.pop(target, None)
    key = _failures_key(target)
    if await cache.aadd(key, 1, timeout=cooldown.seconds):
        failures = 1
    else:
        try:
            failures = await cache.aincr(key)
        except ValueError:  # expired between the two calls
            await cache.aset(key, 1, timeout=cooldown.seconds)
            failures = 1
    if failures < cooldown.failures:
        return False
    await cache.aset(_key(target), 1, timeout=cooldown.seconds)
    await cache.adelete(key)
    ROUTING_COOLDOWNS.labels(str(target.connection_id), target.model).inc()
    return True


async def target_succeeded(target: Target) -> None:
    _recent.pop(target, None)
    await cache.adelete(_failures_key(target))


def health_forget() -> None:
    """Drop this process's recent reads (a test starting afresh: ids are reused)."""
    _recent.clear()
