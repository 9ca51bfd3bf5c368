"""Replica choice: stable rendezvous hashing for affinity, rotating least-loaded otherwise."""

from __future__ import annotations

from collections import Counter

from playground.engine.routing import least_loaded_pick, rendezvous_pick


def test_it_sends_a_session_to_the_same_replica_every_time() -> None:
    assert len({rendezvous_pick("ses_42", [0, 1, 2]) for _ in range(20)}) == 1


def test_it_spreads_sessions_over_the_replicas() -> None:
    counts = Counter(rendezvous_pick(f"ses_{number}", [0, 1]) for number in range(200))

    assert 60 < counts[0] < 140 and counts[0] + counts[1] == 200


def test_it_moves_only_the_dead_replicas_sessions() -> None:
    keys = [f"ses_{number}" for number in range(200)]
    before = {key: rendezvous_pick(key, [0, 1, 2]) for key in keys}
    after = {key: rendezvous_pick(key, [0, 2]) for key in keys}  # replica 1 died

    assert all(after[key] == before[key] for key in keys if before[key] != 1)
    assert {after[key] for key in keys if before[key] == 1} == {0, 2}


def test_it_picks_the_least_loaded_replica() -> None:
    assert least_loaded_pick([(0, 3), (1, 1), (2, 2)], turn=0) == 1


def test_it_rotates_between_equally_loaded_replicas() -> None:
    picks = [least_loaded_pick([(0, 0), (1, 0)], turn=turn) for turn in range(4)]

    assert picks == [0, 1, 0, 1]
