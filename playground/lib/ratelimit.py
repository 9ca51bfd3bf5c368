"""Per-minute rate limits on the `limits` library: one limiter for chat users and gateway keys.

Counted in Redis when `REDIS_URL` is set (the production profile), so a limit holds across
every web process; in this process's memory otherwise (the embedded profile runs one web
process). Fixed one-minute windows: one counter per name and window, one INCR per hit.

In memory, `limits`' own storage starts a thread to sweep expired counters 10 ms after any
count whose sweeper has ended: at the gateway's rate that was a new thread every 10 ms, 13 % of
the admission thread's time (issue 24). `SweptMemoryStorage` is that storage with the same
sweep run by the counting thread itself, at most once a second; an expired counter is already
ignored when read.

Counters are named under the cache's `KEY_PREFIX`, as the chat's counts were when they lived in
the Django cache: deployments sharing one Redis, and test runs (each test has a prefix of its
own), never meet each other's counters.
"""

from __future__ import annotations

import asyncio
import functools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from limits import RateLimitItemPerMinute, storage, strategies
from limits.storage import MemoryStorage
from limits.util import WindowStats

_limiter_lock = threading.Lock()


class SweptMemoryStorage(MemoryStorage):
    """`limits`' memory storage, its expired counters swept by the counting thread at most once
    a second instead of by a new thread every 10 ms (the module's docstring)."""

    STORAGE_SCHEME = ["swept-memory"]  # registers it with `storage_from_string`
    SWEEP_EVERY = 1.0  # seconds

    def __init__(self, uri: str | None = None, wrap_exceptions: bool = False, **options: str) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self._swept = time.monotonic()

    # The name `MemoryStorage`'s own `self.__schedule_expiry()` calls resolves to.
    def _MemoryStorage__schedule_expiry(self) -> None:
        now = time.monotonic()
        if now - self._swept >= self.SWEEP_EVERY:
            self._swept = now
            self._MemoryStorage__expire_events()  # type: ignore[attr-defined]


@functools.cache
def limiter() -> strategies.FixedWindowRateLimiter:
    """The process's limiter, its storage chosen by `REDIS_URL`."""
    # Made once, under a lock: on PostgreSQL the gateway's admissions run in several threads
    # (`lib.db.db_run`), and `limits` imports its Redis client lazily; threads that raced on
    # that import saw "redis version 0.0.0" and failed their requests.
    with _limiter_lock:
        uri = settings.REDIS_URL or "swept-memory://"
        return strategies.FixedWindowRateLimiter(storage.storage_from_string(uri))


@dataclass(frozen=True)
class MinuteLimit:
    """At most `amount` (requests, turns, tokens) a minute for each name counted under `kind`."""

    scope: str  # whose limits: "chat", "gateway"
    kind: str  # what is counted: "turns", "requests", "tokens"
    amount: int

    def hit(self, who: str, *, cost: int = 1) -> bool:
        """Count `cost` against `who`'s minute; False when that went past the limit (still counted)."""
        return limiter().hit(_item(self.scope, self.amount), *self._names(who), cost=cost)

    def window(self, who: str) -> WindowStats:
        """What is left of `who`'s minute and when it resets (a read, nothing counted)."""
        return limiter().get_window_stats(_item(self.scope, self.amount), *self._names(who))

    async def ahit(self, who: str) -> WindowStats | None:
        """`hit` from async code: None when admitted, else the full window (to say when to retry).
        In memory it runs inline (no I/O to wait on); in Redis in a thread, off the event loop."""
        return await _off_loop(lambda: None if self.hit(who) else self.window(who))

    def _names(self, who: str) -> tuple[str, str, str]:
        return (self.kind, _prefix(), who)


def seconds_left(reset_time: float) -> int:
    """Whole seconds until a window's `reset_time`, at least 1 (a `Retry-After`)."""
    return max(1, math.ceil(reset_time - time.time()))


@functools.cache
def _item(scope: str, amount: int) -> RateLimitItemPerMinute:
    return RateLimitItemPerMinute(amount, namespace=scope)


def _prefix() -> str:
    return str(settings.CACHES["default"].get("KEY_PREFIX", ""))


async def _off_loop[T](work: Callable[[], T]) -> T:
    if isinstance(limiter().storage, MemoryStorage):
        return work()
    return await asyncio.to_thread(work)
