"""The shared per-minute limiter: the embedded profile's counters (`SweptMemoryStorage`), counted
as `limits` counts them and swept by the counting thread instead of a new thread every 10 ms;
counters named under the cache's prefix; async hits that need no thread in memory."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.conf import LazySettings
from limits import RateLimitItemPerSecond, storage, strategies

from playground.lib.ratelimit import MinuteLimit, SweptMemoryStorage


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
    counters.timer.join(5)  # the one timer `MemoryStorage.__init__` starts has run
    before = threading.active_count()
    counters.acquire_entry("moving", limit=5, expiry=0)  # an entry that expires at once
    for _ in range(200):
        limiter.hit(RateLimitItemPerSecond(1_000), "key")
    assert threading.active_count() == before
    assert counters.events["moving"] == []  # swept in this thread, by a later count


def test_a_limit_counts_each_name_and_kind_apart_and_a_new_cache_prefix_starts_from_zero(
    settings: LazySettings,
) -> None:
    turns = MinuteLimit("chat", "turns", 2)
    assert [turns.hit("7") for _ in range(3)] == [True, True, False]
    assert turns.window("7").remaining == 0
    assert turns.hit("8")  # another user
    assert MinuteLimit("chat", "other", 2).hit("7")  # another kind
    assert MinuteLimit("gateway", "turns", 2).hit("7")  # another scope

    settings.CACHES = {"default": {**settings.CACHES["default"], "KEY_PREFIX": "another-deployment"}}
    assert turns.window("7").remaining == 2


async def test_an_async_hit_in_memory_runs_on_the_loop_and_returns_the_window_once_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_thread(*args: Any) -> Any:
        raise AssertionError("memory counters need no thread")

    # In memory even in the services profile (REDIS_URL set): that is the case under test.
    in_memory = strategies.FixedWindowRateLimiter(storage.storage_from_string("swept-memory://"))
    monkeypatch.setattr("playground.lib.ratelimit.limiter", lambda: in_memory)
    monkeypatch.setattr("asyncio.to_thread", no_thread)
    limit = MinuteLimit("chat", "turns", 1)
    assert await limit.ahit("9") is None
    refused = await limit.ahit("9")
    assert refused is not None and refused.remaining == 0
    assert 0 < refused.reset_time - time.time() <= 60
