"""A replica's prefix cache: saved KV states of recent conversations, bounded in bytes.

Like llama-cpp-python's `LlamaRAMCache`, an entry is keyed by the tokens whose KV it
holds and the lookup finds the longest common prefix. Unlike it, an entry holds only
the sequence's KV cells (`llama_state_seq_get_data`), not a copy of the logits buffer,
which for Gemma's 262k-token vocabulary would cost hundreds of megabytes per entry.
An entry whose tokens are a prefix of a newer one is dropped: the newer entry serves
every prompt the older one could.

Every entry belongs to a scope (the account id of the request that made it) and is found
only by requests of the same scope. A hit shows as `cached_tokens` and a faster first
token, so a shared cache would let one account probe which prompts another one sent.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Tokens = npt.NDArray[np.intc]


@dataclass(frozen=True)
class CachedState:
    scope: str
    tokens: Tokens
    data: bytes


def common_prefix_length(a: Tokens, b: Tokens) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    mismatches = np.flatnonzero(a[:n] != b[:n])
    return int(mismatches[0]) if len(mismatches) else n


class PrefixCache:
    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[int, CachedState] = OrderedDict()  # least recently used first
        self._next_key = 0

    @property
    def size_bytes(self) -> int:
        return sum(len(entry.data) for entry in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def best_match(self, scope: str, tokens: Tokens) -> tuple[CachedState | None, int]:
        """The entry of `scope` sharing the longest prefix with `tokens`, and that prefix's length."""
        best_key, best_length = None, 0
        for key, entry in self._entries.items():
            if entry.scope != scope:
                continue
            length = common_prefix_length(entry.tokens, tokens)
            if length > best_length:
                best_key, best_length = key, length
        if best_key is None:
            return None, 0
        self._entries.move_to_end(best_key)
        return self._entries[best_key], best_length

    def put(self, scope: str, tokens: Tokens, data: bytes) -> None:
        if len(data) > self.capacity_bytes or len(tokens) == 0:
            return
        for key, entry in list(self._entries.items()):
            if (
                entry.scope == scope
                and len(entry.tokens) <= len(tokens)
                and common_prefix_length(entry.tokens, tokens) == len(entry.tokens)
            ):
                del self._entries[key]
        self._entries[self._next_key] = CachedState(scope=scope, tokens=tokens.copy(), data=data)
        self._next_key += 1
        while self.size_bytes > self.capacity_bytes:
            self._entries.popitem(last=False)
