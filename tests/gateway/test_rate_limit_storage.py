"""Per-key rate limits of requests admitted together (`rate_admit_many`), each counted on its own
(the counters themselves: tests/lib/test_ratelimit.py)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from limits import strategies

from playground.gateway.errors import GatewayError
from playground.gateway.ratelimits import RateState, rate_admit_many
from playground.usage.api_keys import api_key_issue
from tests.support.actors import Actors


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
