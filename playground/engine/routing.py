"""Which replica takes a request: rendezvous hashing for affinity, least-loaded otherwise.

Rendezvous (highest-random-weight) hashing sends a session to the same replica for as
long as that replica is live, moves only that replica's sessions when it dies, and moves
them back when it returns. Ties between equally loaded replicas rotate, so idle replicas
take turns instead of the first one taking everything (which would be hidden affinity).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def rendezvous_pick(key: str, candidates: Sequence[int]) -> int:
    """The candidate (a replica index) with the highest hash weight for `key`."""
    return max(candidates, key=lambda index: hashlib.sha256(f"{key}\x00{index}".encode()).digest())


def least_loaded_pick(loads: Sequence[tuple[int, int]], turn: int) -> int:
    """The index of the least-loaded (index, load) pair, breaking ties in rotation from `turn`."""
    count = len(loads)
    rotated = [loads[(turn + offset) % count] for offset in range(count)]
    return min(rotated, key=lambda pair: pair[1])[0]
