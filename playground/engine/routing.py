"""Which replica takes a request: rendezvous hashing for affinity, else round-robin or least-loaded.

Without `x-session-affinity` the default is round-robin, as a stateless load balancer in
front of a fleet sends requests (the vLLM production-stack router's default): a
conversation's next turn usually lands on another replica, whose prefix cache does not
hold it. That is what makes the header's effect visible on a laptop. Least-loaded is the
alternative; it is sticky for clients that wait for each answer (the replica that just
answered is the idle one), so it behaves almost as if every request carried the header.

Rendezvous (highest-random-weight) hashing sends a session to the same replica for as
long as that replica is live, moves only that replica's sessions when it dies, and moves
them back when it returns. Ties between equally loaded replicas rotate, so idle replicas
take turns instead of the first one taking everything (which would be hidden affinity).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

BALANCES = ("round-robin", "least-loaded")  # placements for requests without x-session-affinity


def rendezvous_pick(key: str, candidates: Sequence[int]) -> int:
    """The candidate (a replica index) with the highest hash weight for `key`."""
    return max(candidates, key=lambda index: hashlib.sha256(f"{key}\x00{index}".encode()).digest())


def least_loaded_pick(loads: Sequence[tuple[int, int]], turn: int) -> int:
    """The index of the least-loaded (index, load) pair, breaking ties in rotation from `turn`."""
    count = len(loads)
    rotated = [loads[(turn + offset) % count] for offset in range(count)]
    return min(rotated, key=lambda pair: pair[1])[0]


def round_robin_pick(previous: int, live: Sequence[int], count: int) -> int:
    """The first live replica index after `previous`, wrapping around `count` replicas."""
    alive = set(live)
    return next(index for step in range(1, count + 1) if (index := (previous + step) % count) in alive)
