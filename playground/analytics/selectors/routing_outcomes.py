"""What the teams' routing policies did in the period: how often retries and fallbacks saved a
request, why requests moved on, the money downgrades moved, and time to first token by tag.

Read from the records (the rollups hold no routing): the routed ones through a partial index
(`usage_team_routed`), narrowed by every filter the request log takes. A request's outcome is its
last attempt's record (the one whose decision names a final target).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal

from django.utils import timezone

from playground.analytics.filters import Filters
from playground.analytics.selectors.request_log import log_records
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.models import UsageStatus
from playground.usage.pricing import cost_for
from playground.usage.records import price_card_known

TAGGED_FROM = 50_000  # TTFT by tag is taken over the latest this many tagged requests, at most
TAGS_SHOWN = 10


@dataclass(frozen=True)
class Rate:
    requests: int
    succeeded: int

    @property
    def share(self) -> float | None:
        return self.succeeded / self.requests if self.requests else None


@dataclass(frozen=True)
class TagLatency:
    tag: str
    requests: int
    p50_ms: int
    p95_ms: int


@dataclass
class RoutingOutcomes:
    requests: int = 0  # routed requests (their last attempt)
    retried: Rate = Rate(0, 0)  # requests that needed more than one attempt
    fell_back: Rate = Rate(0, 0)  # requests answered (or not) by another target than their first
    moved_on: list[tuple[str, int]] = field(default_factory=list)  # why attempts moved on, commonest first
    downgraded: int = 0
    downgrade_requested_usd: Decimal = Decimal(0)  # the downgraded requests at the targets requested
    downgrade_paid_usd: Decimal = Decimal(0)  # what they cost where they went
    unpriced_downgrades: int = 0  # requested targets with no price card: left out of the two sums
    by_tag: list[TagLatency] = field(default_factory=list)
    tags_sampled: bool = False

    @property
    def downgrade_moved_usd(self) -> Decimal:
        return self.downgrade_requested_usd - self.downgrade_paid_usd


def routing_outcomes(filters: Filters) -> RoutingOutcomes:
    records = log_records(filters)
    outcomes = RoutingOutcomes()
    retried, fell_back = Counter[bool](), Counter[bool]()
    moved: Counter[str] = Counter()
    day = timezone.now().date()
    rows = (
        records.filter(routing__isnull=False)
        .order_by()
        .values_list("routing", "status", "prompt_tokens", "cached_tokens", "completion_tokens", "total_cost")
    )
    for routing, status, prompt, cached, completion, cost in rows.iterator(chunk_size=2000):
        if not isinstance(routing, dict) or not routing.get("final"):
            continue  # an attempt that moved on: its request is counted at its last attempt
        attempts = [a for a in routing.get("attempts", []) if isinstance(a, dict)]
        ok = status == UsageStatus.OK
        outcomes.requests += 1
        moved.update(str(a["moved_on"]) for a in attempts if a.get("moved_on"))
        if len(attempts) > 1:
            retried[ok] += 1
            if attempts[0].get("target") != routing.get("final"):
                fell_back[ok] += 1
        downgrade = routing.get("downgrade")
        if isinstance(downgrade, dict) and ok:
            outcomes.downgraded += 1
            requested = downgrade.get("requested_model_id")
            known = (
                price_card_known(model_id=str(requested), day=day, team_id=filters.team.pk)
                if requested
                else None
            )
            card = known.card if known is not None else None
            if card is None:
                outcomes.unpriced_downgrades += 1
                continue
            usage = NormalizedUsage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)
            outcomes.downgrade_requested_usd += cost_for(usage=usage, card=card).total
            outcomes.downgrade_paid_usd += cost
    outcomes.retried = Rate(retried[True] + retried[False], retried[True])
    outcomes.fell_back = Rate(fell_back[True] + fell_back[False], fell_back[True])
    outcomes.moved_on = moved.most_common()
    outcomes.by_tag, outcomes.tags_sampled = _ttft_by_tag(filters)
    return outcomes


def _ttft_by_tag(filters: Filters) -> tuple[list[TagLatency], bool]:
    """p50 and p95 time to first token of each tag's answered requests (the operators' "by
    workflow"), the busiest tags first."""
    tagged = (
        log_records(filters)
        .exclude(tags="")
        .filter(ttft_ms__isnull=False, status=UsageStatus.OK)
        .order_by("-created_at", "-id")
        .values_list("tags", "ttft_ms")[: TAGGED_FROM + 1]
    )
    by_tag: dict[str, list[int]] = {}
    read = 0
    for tags, ttft in tagged:
        read += 1
        if read > TAGGED_FROM:
            break
        if ttft is None:  # (filtered out above; for the type)
            continue
        for tag in tags.strip(",").split(","):
            by_tag.setdefault(tag, []).append(ttft)
    rows = [
        TagLatency(tag=tag, requests=len(times), p50_ms=round(statistics.median(times)), p95_ms=_p95(times))
        for tag, times in by_tag.items()
    ]
    rows.sort(key=lambda row: (-row.requests, row.tag))
    return rows[:TAGS_SHOWN], read > TAGGED_FROM


def _p95(times: list[int]) -> int:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
