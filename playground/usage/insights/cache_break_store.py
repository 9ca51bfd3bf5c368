"""Cache breaks kept when records are written (issue 40), and what the pages read of them.

`cache_breaks_settle(records)` runs inside the record writer's transaction (`usage.records`):
a record that cannot break (`may_break`: not answered, no cached count, or cached within a
cache's granularity of its whole prompt) costs nothing; for the others their sessions' requests
before them, read in one query for the group (`detected_breaks`, the detector the replay uses),
decide. A break is a `UsageCacheBreak` row and one upsert of its hour's sums by cause
(`UsageCacheBreakHourly`), so the dashboard's chart reads a few rows per hour, not the records.

`cache_breaks_rebuild(team_id=, day=)` recomputes one team-day from the records with the replay
(`team_breaks`), in its own transaction: `manage.py rebuild_cache_breaks` walks the days, so a
stopped run resumes from the day it printed last.

A break's `turn` counts from the session's start where it is shown (`with_turn`, or the
conversation's answered records); what is kept is the detector's count from the requests it read
(an inferred session's true turn: its chain is read whole).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from decimal import Decimal

from django.db import transaction

from playground.usage.insights.cache_break_selectors import (
    ANSWERED,
    BreakShown,
    breaks_shown,
    detected_breaks,
    team_breaks,
    with_turn,
)
from playground.usage.insights.cache_breaks import CacheBreak, Cause, may_break
from playground.usage.insights.session_inference import INFERRED
from playground.usage.insights.sessions import session_key
from playground.usage.models import UsageCacheBreak, UsageCacheBreakHourly, UsageRecord
from playground.usage.rollups import cost_e10, hour_start
from playground.usage.statements.rollups import BucketRow, rollup_upsert_many

logger = logging.getLogger(__name__)
DAY = dt.timedelta(days=1)
DETAIL_MAX = 300  # UsageCacheBreak.detail's length
# What a kept break reads of its record: the session's name and the price of what was lost.
RECORD_FIELDS = ("record__conversation_id", "record__session", "record__affinity_key")


def cache_breaks_settle(records: Sequence[UsageRecord]) -> list[CacheBreak]:
    """Find and keep the breaks at freshly written `records` (inside their transaction). A
    failure here costs no record: it is logged, and `rebuild_cache_breaks` finds them later."""
    candidates = [
        record
        for record in records
        if record.status in ANSWERED
        and may_break(prompt_tokens=record.prompt_tokens, cached_tokens=record.cached_tokens)
    ]
    if not candidates:
        return []
    # The price cards the writer already holds: no query for the lost money.
    cards = {
        record.price_card.pk: record.price_card for record in candidates if record.price_card is not None
    }
    try:
        with transaction.atomic():  # a savepoint: the records stay if this fails
            team_of = {record.pk: record.team_id for record in candidates}
            found = [(team_of[each.record_id], each) for each in detected_breaks(candidates, cards)]
            _keep(found)
    except Exception:
        logger.exception("could not look for cache breaks at written records; run rebuild_cache_breaks")
        return []
    return [each for _, each in found]


def _keep(found: Sequence[tuple[int, CacheBreak]]) -> None:
    """One row per break, and their sums added to their hours (one upsert for all of them)."""
    UsageCacheBreak.objects.bulk_create(_row(team_id, each) for team_id, each in found)
    rollup_upsert_many(UsageCacheBreakHourly, _hours(found))


def _row(team_id: int, found: CacheBreak) -> UsageCacheBreak:
    assert found.created_at is not None  # every break the selectors find is of a stored record
    return UsageCacheBreak(
        record_id=found.record_id,
        team_id=team_id,
        created_at=found.created_at,
        previous_record_id=found.previous_record_id,
        inferred_session=found.session if found.session.startswith(INFERRED) else "",
        cause=str(found.cause),
        detail=found.detail[:DETAIL_MAX],
        cached_tokens=found.cached_tokens,
        expected_cached_tokens=found.expected_cached_tokens,
        lost_usd=found.lost_usd,
        changed_turn=found.changed_turn,
        turn=found.turn,
    )


def _hours(found: Iterable[tuple[int, CacheBreak]]) -> list[BucketRow]:
    sums: dict[tuple[int, dt.datetime, str], dict[str, int]] = {}
    for team_id, each in found:
        assert each.created_at is not None
        key = (team_id, hour_start(each.created_at), str(each.cause))
        total = sums.setdefault(key, {"breaks": 0, "lost_tokens": 0, "lost_e10": 0})
        total["breaks"] += 1
        total["lost_tokens"] += each.lost_tokens
        total["lost_e10"] += cost_e10(each.lost_usd)
    return [
        ({"team_id": team, "bucket": bucket, "cause": cause}, total, {})
        for (team, bucket, cause), total in sums.items()
    ]


# --- rebuild from the records ----------------------------------------------------------------


def cache_breaks_rebuild(*, team_id: int, day: dt.date) -> int:
    """Recompute the team's breaks of `day` (UTC) and their hours from its records; how many."""
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
    with transaction.atomic():
        UsageCacheBreak.objects.filter(
            team_id=team_id, created_at__gte=start, created_at__lt=start + DAY
        ).delete()
        UsageCacheBreakHourly.objects.filter(
            team_id=team_id, bucket__gte=start, bucket__lt=start + DAY
        ).delete()
        found = [(team_id, each) for each in team_breaks(team_id=team_id, since=start, until=start + DAY)]
        _keep(found)
    return len(found)


def days_to_rebuild(*, team_id: int, since: dt.date | None) -> list[dt.date]:
    """The UTC days from `since` (default: the team's first record's) to its last record's."""
    records = UsageRecord.objects.filter(team_id=team_id).order_by()
    first = records.order_by("created_at").values_list("created_at", flat=True).first()
    last = records.order_by("-created_at").values_list("created_at", flat=True).first()
    if first is None or last is None:
        return []
    day, until = since or first.astimezone(dt.UTC).date(), last.astimezone(dt.UTC).date()
    days = []
    while day <= until:
        days.append(day)
        day += DAY
    return days


# --- what the pages read -----------------------------------------------------------------------


def _kept(row: UsageCacheBreak) -> CacheBreak:
    """A kept break as the detector found it (`turn` as it counted: `with_turn` counts it from
    the session's start)."""
    record = row.record
    session = row.inferred_session or session_key(
        conversation_id=record.conversation_id, session=record.session, affinity_key=record.affinity_key
    )
    return CacheBreak(
        record_id=row.record_id,
        previous_record_id=row.previous_record_id,
        session=session,
        turn=row.turn,
        cause=Cause(row.cause),
        detail=row.detail,
        cached_tokens=row.cached_tokens,
        expected_cached_tokens=row.expected_cached_tokens,
        lost_usd=Decimal(row.lost_usd),
        changed_turn=row.changed_turn,
        created_at=row.created_at,
    )


def _kept_rows(**lookups: object) -> Iterator[CacheBreak]:
    rows = (
        UsageCacheBreak.objects.filter(**lookups)
        .select_related("record")
        .only(*(field.name for field in UsageCacheBreak._meta.concrete_fields), *RECORD_FIELDS)
    )
    for row in rows.order_by("created_at", "record_id").iterator(chunk_size=2000):
        yield _kept(row)


def record_break(record: UsageRecord) -> CacheBreak | None:
    """The break kept at `record`, its turn counted from the session's start (the record page's
    and the finished answer's notice)."""
    found = next(_kept_rows(record_id=record.pk), None)
    return with_turn(found, team_id=record.team_id) if found is not None else None


def kept_team_breaks(
    *, team_id: int, since: dt.datetime, until: dt.datetime | None = None
) -> Iterator[CacheBreak]:
    """The team's kept breaks whose request lies in [since, until), oldest first."""
    period = {"created_at__lt": until} if until is not None else {}
    return _kept_rows(team_id=team_id, created_at__gte=since, **period)


def conversation_breaks(*, team_id: int, conversation_id: int) -> dict[int, CacheBreak]:
    """The conversation's kept breaks by the id of the record that broke, each turn counted among
    the conversation's answered requests (one query for the breaks, one for those)."""
    found = list(_kept_rows(team_id=team_id, record__conversation_id=conversation_id))
    if not found:
        return {}
    answered = (
        UsageRecord.objects.filter(
            team_id=team_id, conversation_id=conversation_id, status__in=ANSWERED, prompt_tokens__gt=0
        )
        .order_by("created_at", "id")
        .values_list("pk", flat=True)
    )
    turns = {pk: turn for turn, pk in enumerate(answered, start=1)}
    return {each.record_id: replace(each, turn=turns.get(each.record_id, 0)) for each in found}


def conversation_breaks_shown(*, team_id: int, conversation_id: int) -> dict[int, BreakShown]:
    """The conversation's breaks as shown under their answers, by the id of the record that broke."""
    return breaks_shown(list(conversation_breaks(team_id=team_id, conversation_id=conversation_id).values()))
