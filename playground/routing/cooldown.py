"""Targets that keep failing are skipped for a while, by every web process alike.

The state is in Django's cache: Redis in production (shared by all web processes), memory
otherwise. A target's consecutive failures are counted; at `Cooldown.failures` it cools for
`Cooldown.seconds` (`routing.resolve` puts it at the back of a fallback order); a success
clears its count.
"""

from __future__ import annotations

from django.core.cache import cache

from playground.routing.plan import Cooldown, Target


def _key(target: Target) -> str:
    return f"routing:cool:{target.connection_id}:{target.model}"


def _failures_key(target: Target) -> str:
    return f"routing:fail:{target.connection_id}:{target.model}"


def target_cooling(target: Target) -> bool:
    """Whether `target` is cooling down now (one cache read)."""
    return cache.get(_key(target)) is not None


async def target_failed(target: Target, cooldown: Cooldown) -> bool:
    """Count a failure; returns whether the target now cools down. The count lives as long as a
    cooldown, so failures far apart never add up to one."""
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
    return True


async def target_succeeded(target: Target) -> None:
    await cache.adelete(_failures_key(target))
