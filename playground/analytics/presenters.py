"""Display helpers for the log and detail pages (no queries, no money arithmetic of their own)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from django.urls import NoReverseMatch, reverse

from playground.usage.models import UsageRecord

BATCH_SOURCE = re.compile(r"^batch-item:(?P<item>\d+):(?P<attempt>\d+)$")


@dataclass(frozen=True)
class FormulaLine:
    name: str
    tokens: str  # e.g. "(2,000 - 1,500)"
    tokens_count: int
    price_per_m: Decimal
    cost: Decimal


def cost_formula(record: UsageRecord) -> list[FormulaLine]:
    """The record's cost components with the card's prices filled in, as stored (nothing recomputed)."""
    card = record.price_card
    if card is None:
        return []
    cached = record.cached_tokens or 0
    return [
        FormulaLine(
            "Fresh input",
            f"({record.prompt_tokens:,} prompt - {cached:,} cached)",
            record.prompt_tokens - cached,
            card.input_per_m,
            record.input_cost,
        ),
        FormulaLine(
            "Cached input",
            f"{cached:,} cached",
            cached,
            card.effective_cached_input_per_m,
            record.cached_input_cost,
        ),
        FormulaLine(
            "Output",
            f"{record.completion_tokens:,} completion",
            record.completion_tokens,
            card.output_per_m,
            record.output_cost,
        ),
    ]


@dataclass(frozen=True)
class SourceLink:
    label: str
    url: str


def source_link(record: UsageRecord) -> SourceLink | None:
    """Where the request came from: its conversation, or its batch item."""
    if record.conversation_id is not None:
        title = (
            str(record.conversation)
            if record.conversation is not None
            else f"Conversation {record.conversation_id}"
        )
        return SourceLink(title, reverse("chat:conversation-detail", args=[record.conversation_id]))
    return batch_item_link(record.source)


def batch_item_link(source: str) -> SourceLink | None:
    """A batch record's item (source "batch-item:<id>:<attempt>"), read from the source alone so
    the log links each row to its item without a query."""
    match = BATCH_SOURCE.match(source)
    if not match:
        return None
    attempt = int(match["attempt"])
    label = f"Batch item {match['item']}" + (f", attempt {attempt}" if attempt > 1 else "")
    try:
        url = reverse("batches:item-detail", args=[int(match["item"])])
    except NoReverseMatch:
        url = ""
    return SourceLink(label, url)
