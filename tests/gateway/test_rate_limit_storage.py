"""The embedded profile's rate-limit counters (`SweptMemoryStorage`): counted as `limits` counts
them, swept by the counting thread instead of a new thread every 10 ms."""

from __future__ import annotations

import threading
import time

from limits import RateLimitItemPerSecond, storage, strategies

from playground.gateway.ratelimits import SweptMemoryStorage


def test_the_scheme_names_the_swept_storage_and_it_counts_a_fixed_window() -> None:
    counters = storage.storage_from_string("swept-memory://")
    assert isinstance(counters, SweptMemoryStorage)
    limiter = strategies.FixedWindowRateLimiter(counters)
    item = RateLimitItemPerSecond(3)
    assert [limiter.hit(item, "key") for _ in range(4)] == [True, True, True, False]
    assert limiter.get_window_stats(item, "key").remaining == 0


def test_counting_starts_no_thread_and_expired_counters_are_swept_by_the_counting_thread() -> None:
    counters = SweptMemoryStorage()
    counters.SWEEP_EVERY = 0.0  # every count sweeps
    limiter = strategies.FixedWindowRateLimiter(counters)
    time.sleep(0.05)  # the one timer `MemoryStorage.__init__` starts has run
    before = threading.active_count()
    counters.acquire_entry("moving", limit=5, expiry=0)  # an entry that expires at once
    for _ in range(200):
        limiter.hit(RateLimitItemPerSecond(1_000), "key")
    assert threading.active_count() == before
    assert counters.events["moving"] == []  # swept in this thread, by a later count
