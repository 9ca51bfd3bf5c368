"""Per-key rate limits: the embedded profile's counters (`SweptMemoryStorage`), counted as
`limits` counts them and swept by the counting thread instead of a new thread every 10 ms; and
requests admitted together (`rate_admit_many`), each counted on its own."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from limits import RateLimitItemPerSecond, storage, strategies

from playground.gateway.errors import GatewayError
from playground.gateway.ratelimits import RateState, SweptMemoryStorage, rate_admit_many
from playground.usage.api_keys import api_key_issue
from tests.support.actors import Actors


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


@pytest.mark.django_db
def test_a_group_is_counted_request_by_request_with_each_keys_window_read_once(
    actors: Actors, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, _ = api_key_issue(
        team_id=actors.team.pk,
        name="ci",
        connection_id=None,
        created_by_id=actors.owner.pk,
        requests_per_minute=3,
        tokens_per_minute=1_000,
    )
    key.prefix = uuid.uuid4().hex[:10]  # a counter of its own (the storage outlives test databases)
    reads: list[str] = []
    real = strategies.FixedWindowRateLimiter.get_window_stats

    def counted(self: strategies.FixedWindowRateLimiter, item: Any, *identifiers: str) -> Any:
        reads.append(identifiers[0])
        return real(self, item, *identifiers)

    monkeypatch.setattr(strategies.FixedWindowRateLimiter, "get_window_stats", counted)
    states = rate_admit_many([key] * 5)
    assert sorted(reads) == ["requests", "tokens"]  # once each for the group
    admitted = [state for state in states if isinstance(state, RateState)]
    assert [state.headers["x-ratelimit-remaining-requests"] for state in admitted] == ["2", "1", "0"]
    refused = states[3:]
    assert all(isinstance(state, GatewayError) and state.status == 429 for state in refused)
    assert "may send 3 requests a minute" in str(refused[0])
