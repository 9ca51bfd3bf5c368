"""The per-replica prefix cache: longest-prefix lookup per account, LRU eviction within a byte budget."""

from __future__ import annotations

import numpy as np

from playground.engine.prefix_cache import PrefixCache, common_prefix_length


def tokens(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.intc)


def test_it_measures_the_common_prefix() -> None:
    assert common_prefix_length(tokens(1, 2, 3, 4), tokens(1, 2, 9)) == 2
    assert common_prefix_length(tokens(1, 2), tokens(1, 2, 3)) == 2
    assert common_prefix_length(tokens(), tokens(1)) == 0


def test_it_finds_the_entry_with_the_longest_common_prefix() -> None:
    cache = PrefixCache(capacity_bytes=1000)
    cache.put("acct", tokens(1, 2, 3, 4), b"a" * 10)
    cache.put("acct", tokens(1, 2, 7, 8, 9), b"b" * 10)

    entry, length = cache.best_match("acct", tokens(1, 2, 7, 8, 5))

    assert entry is not None and entry.data == b"b" * 10 and length == 4


def test_it_finds_nothing_without_a_common_prefix() -> None:
    cache = PrefixCache(capacity_bytes=1000)
    cache.put("acct", tokens(1, 2), b"a")

    assert cache.best_match("acct", tokens(5, 6)) == (None, 0)


def test_it_drops_an_entry_that_a_longer_one_extends() -> None:
    cache = PrefixCache(capacity_bytes=1000)
    cache.put("acct", tokens(1, 2, 3), b"turn one")
    cache.put("acct", tokens(1, 2, 3, 4, 5), b"turn two")

    assert len(cache) == 1
    assert cache.best_match("acct", tokens(1, 2, 3))[0].data == b"turn two"  # type: ignore[union-attr]


def test_it_evicts_the_least_recently_used_entries_beyond_its_byte_budget() -> None:
    cache = PrefixCache(capacity_bytes=25)
    cache.put("acct", tokens(1), b"x" * 10)
    cache.put("acct", tokens(2), b"y" * 10)
    cache.best_match("acct", tokens(1))  # 1 is now the most recently used
    cache.put("acct", tokens(3), b"z" * 10)

    assert cache.size_bytes == 20
    assert cache.best_match("acct", tokens(2)) == (None, 0)
    assert cache.best_match("acct", tokens(1))[1] == 1


def test_it_does_not_keep_a_state_larger_than_its_budget() -> None:
    cache = PrefixCache(capacity_bytes=5)
    cache.put("acct", tokens(1), b"x" * 10)

    assert len(cache) == 0


def test_it_never_serves_one_accounts_entry_to_another() -> None:
    cache = PrefixCache(capacity_bytes=1000)
    cache.put("team-1", tokens(1, 2, 3, 4), b"team one's state")

    assert cache.best_match("team-2", tokens(1, 2, 3, 4, 5)) == (None, 0)
    assert cache.best_match("team-1", tokens(1, 2, 3, 4, 5))[1] == 4


def test_a_longer_entry_of_another_account_does_not_replace_an_entry() -> None:
    cache = PrefixCache(capacity_bytes=1000)
    cache.put("team-1", tokens(1, 2, 3), b"one")
    cache.put("team-2", tokens(1, 2, 3, 4, 5), b"two")

    assert len(cache) == 2
    assert cache.best_match("team-1", tokens(1, 2, 3, 4, 5))[0].data == b"one"  # type: ignore[union-attr]
