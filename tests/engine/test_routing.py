"""Replica choice: rendezvous hashing for affinity; round-robin or rotating least-loaded otherwise."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from playground.engine.batch_queue import BatchQueue
from playground.engine.jobs import Job
from playground.engine.pool import ModelReplicas, ReplicaPool
from playground.engine.protocol import GenerationSpec
from playground.engine.replica import ReplicaSettings
from playground.engine.routing import least_loaded_pick, rendezvous_pick, round_robin_pick


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


def test_round_robin_takes_each_replica_in_turn() -> None:
    picks, previous = [], -1
    for _ in range(6):
        previous = round_robin_pick(previous, [0, 1, 2], 3)
        picks.append(previous)

    assert picks == [0, 1, 2, 0, 1, 2]


def test_round_robin_skips_dead_replicas() -> None:
    picks, previous = [], 0
    for _ in range(4):
        previous = round_robin_pick(previous, [0, 2, 3], 4)  # replica 1 is down
        picks.append(previous)

    assert picks == [2, 3, 0, 2]


def idle_pool(
    tmp_path: Path, balance: str, *, live: tuple[int, ...] = (0, 1, 2), second_model: int = 0
) -> ReplicaPool:
    """Three replicas of model "m" (then `second_model` of "g") whose processes are never
    started, `live` of them ready."""
    settings = ReplicaSettings(tmp_path / "none.gguf", "", 512, 1, 1, "INFO")
    models = [ModelReplicas("m", settings, 3), ModelReplicas("g", settings, second_model)]
    pool = ReplicaPool(
        models, queue=BatchQueue(tmp_path / "queue.sqlite3"), batch_spec=lambda item: SPEC, balance=balance
    )
    for index in live:
        pool.replicas[index].ready = True
    return pool


SPEC = GenerationSpec(messages=[{"role": "user", "content": "Hi"}], max_tokens=1)


def placements(pool: ReplicaPool, count: int, model: str = "m", affinity: str = "") -> list[int | None]:
    """Where `count` requests go, each answered before the next arrives."""
    picks = []
    for _ in range(count):
        job = pool.submit(SPEC, model=model, affinity=affinity)
        picks.append(job.replica_index)
        pool.replicas[job.replica_index or 0].pending.remove(job)
    return picks


async def test_round_robin_takes_a_busy_replica_in_its_turn(tmp_path: Path) -> None:
    pool = idle_pool(tmp_path, "round-robin")
    pool.replicas[0].current = Job(SPEC)  # a long answer keeps replica 0 busy

    assert placements(pool, 4) == [0, 1, 2, 0]


async def test_least_loaded_avoids_a_busy_replica(tmp_path: Path) -> None:
    pool = idle_pool(tmp_path, "least-loaded")
    pool.replicas[0].current = Job(SPEC)

    assert 0 not in placements(pool, 4)


async def test_round_robin_skips_replicas_that_are_not_ready(tmp_path: Path) -> None:
    pool = idle_pool(tmp_path, "round-robin", live=(0, 2))

    assert placements(pool, 4) == [0, 2, 0, 2]


async def test_each_model_takes_turns_among_its_own_replicas_only(tmp_path: Path) -> None:
    pool = idle_pool(tmp_path, "round-robin", live=(0, 1, 2, 3, 4), second_model=2)

    assert placements(pool, 1, "m") == [0]
    assert placements(pool, 3, "g") == [3, 4, 3]
    assert placements(pool, 3, "m") == [1, 2, 0]  # the other model's requests did not move its turn
    assert set(placements(pool, 4, "g", affinity="ses_1")) < {3, 4}  # one of its own, every time


async def test_least_loaded_picks_among_the_models_own_replicas(tmp_path: Path) -> None:
    pool = idle_pool(tmp_path, "least-loaded", live=(0, 1, 2, 3, 4), second_model=2)
    for index in (3, 4):
        pool.replicas[index].current = Job(SPEC)  # the second model's replicas are busy

    assert set(placements(pool, 4, "g")) == {3, 4}
    assert set(placements(pool, 6, "m")) == {0, 1, 2}
