"""Percentiles from the rollups' fixed-bucket histograms (pure arithmetic, no database).

Bucket i holds values in [EDGES[i], EDGES[i+1]); inside a bucket the values are taken as
spread evenly, so a percentile is exact to the bucket's width. The last bucket is open:
a percentile that falls in it is reported as its lower edge (a floor, shown as "≥").
"""

from __future__ import annotations

from collections.abc import Sequence

from playground.usage.models import HISTOGRAM_EDGES_MS


def percentile(counts: Sequence[int], q: float, edges: Sequence[int] = HISTOGRAM_EDGES_MS) -> float | None:
    """The q-th percentile (0 < q <= 100) of a histogram; None for an empty one."""
    total = sum(counts)
    if total == 0:
        return None
    rank = q / 100 * total
    seen = 0
    for i, count in enumerate(counts):
        if count and seen + count >= rank:
            if i + 1 >= len(edges):
                return float(edges[i])
            low, high = edges[i], edges[i + 1]
            return low + (high - low) * (rank - seen) / count
        seen += count
    return float(edges[len(counts) - 1])


def bucket_labels(edges: Sequence[int] = HISTOGRAM_EDGES_MS) -> list[str]:
    """ "0-50 ms", ..., "≥ 60 s": one label per bucket."""
    labels = []
    for i, low in enumerate(edges):
        if i + 1 < len(edges):
            labels.append(f"{_ms(low)}-{_ms(edges[i + 1])}")
        else:
            labels.append(f"≥ {_ms(low)}")
    return labels


def _ms(value: int) -> str:
    return f"{value / 1000:g} s" if value >= 1000 else f"{value} ms"
