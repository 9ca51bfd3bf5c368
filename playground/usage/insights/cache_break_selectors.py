"""The cache-break detector over stored records: at one record (when it is written), or over a
team's period (`team_breaks`, the rebuild's replay); and a break as a page shows it.

What the pages, the chart and the command read is kept by `cache_break_store`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import groupby
from typing import Any

from django.db.models import Case, F, JSONField, QuerySet, Value, When

from playground.accounts.models import StoreMode
from playground.catalog.models import PriceCard
from playground.usage.insights.cache_break_diff import SECTION_CAUSES, DiffLine, section_diff
from playground.usage.insights.cache_breaks import CacheBreak, SessionRequest, session_breaks
from playground.usage.insights.session_inference import INFERRABLE, INFERRED, Turn, sessions_infer
from playground.usage.insights.sessions import session_filter, session_key, session_key_expression
from playground.usage.models import UsageRecord, UsageStatus
from playground.usage.prefix_digest import PrefixDigest, prefix_digest

FIELDS = (
    "id",
    "model_id",
    "prefix_digest",
    "affinity_key",
    "prompt_tokens",
    "cached_tokens",
    "status",
    "created_at",
    "conversation_id",
    "session",
    "price_card_id",
    "connection_id",
    "route_rule",
    "route_fell_back",
    "api_key_id",
    "end_user",
)
# Records written before digests were kept are digested from their body, read in the same query.
BODY_IF_UNDIGESTED = Case(
    When(prefix_digest__isnull=True, then=F("request_body")), default=Value(None), output_field=JSONField()
)
# The longest a session's previous request may lie before the period and still be compared.
LOOKBACK = dt.timedelta(days=1)
RECENT = 10  # records read back from one to find the answered request before it


def detected_break(record: UsageRecord, cards: dict[int, PriceCard] | None = None) -> CacheBreak | None:
    """The break at `record`, if its session broke there, against the session's requests before
    it (`cache_break_store` keeps it when the record is written). Its `turn` counts from the
    first request read; `with_turn` counts it from the session's start. `cards`: price cards
    already at hand, by id."""
    if record.conversation_id is None and not record.session and record.api_key_id is not None:
        return _inferred_record_break(record, cards)
    session = session_key(
        conversation_id=record.conversation_id, session=record.session, affinity_key=record.affinity_key
    )
    if not session:
        return None
    # The request before it (skipping back over a few failed ones) decides.
    recent = list(
        _up_to(record.team_id, session, record.pk, record.created_at)
        .filter(created_at__gte=record.created_at - LOOKBACK)
        .order_by("-created_at", "-id")
        .only(*FIELDS)
        .annotate(body_if_undigested=BODY_IF_UNDIGESTED)[:RECENT]
    )[::-1]
    found = [b for b in session_breaks(session, _requests(recent, cards)) if b.record_id == record.pk]
    return found[0] if found else None


def with_turn(found: CacheBreak, *, team_id: int) -> CacheBreak:
    """`found` with its turn counted from the session's first request (the detector counts
    from the first request it was given; an inferred session's turns are counted so already)."""
    if found.created_at is None or found.session.startswith(INFERRED):
        return found
    up_to = _up_to(team_id, found.session, found.record_id, found.created_at)
    return replace(found, turn=up_to.filter(status__in=ANSWERED, prompt_tokens__gt=0).count())


def team_breaks(
    *, team_id: int, since: dt.datetime, until: dt.datetime | None = None
) -> Iterator[CacheBreak]:
    """Every break of the team's sessions whose request lies in [since, until), session by session.

    Reads the records of the period (and a day before it, for each session's previous
    request) through `.iterator()`: only their digests and counts, never a body. A break's
    `turn` counts from the first record read; `with_turn` counts it from the session's start.
    """
    records = (
        UsageRecord.objects.filter(team_id=team_id, created_at__gte=since - LOOKBACK)
        .exclude(INFERRABLE)
        .annotate(session_key=session_key_expression())
        .exclude(session_key="")
        .order_by("session_key", "created_at", "id")
        .only(*FIELDS)
        .annotate(body_if_undigested=BODY_IF_UNDIGESTED)
    )
    if until is not None:
        records = records.filter(created_at__lt=until)
    cards: dict[int, PriceCard] = {}
    for session, rows in groupby(records.iterator(chunk_size=2000), key=lambda row: row.session_key):
        for found in session_breaks(session, _requests(rows, cards)):
            if found.created_at is not None and found.created_at >= since:
                yield found
    inferrable = UsageRecord.objects.filter(INFERRABLE, team_id=team_id, created_at__gte=since - LOOKBACK)
    if until is not None:
        inferrable = inferrable.filter(created_at__lt=until)
    for inferred_session, chained in _inferred(inferrable):
        for found in session_breaks(inferred_session, _requests(chained, cards)):
            if found.created_at is not None and found.created_at >= since:
                yield found


def _inferred(records: QuerySet[UsageRecord]) -> list[tuple[str, list[UsageRecord]]]:
    """The sessions inferred among a key's records that named none (`session_inference`)."""
    ordered = (
        records.order_by("api_key_id", "end_user", "created_at", "id")
        .only(*FIELDS)
        .annotate(body_if_undigested=BODY_IF_UNDIGESTED)
    )
    turns = (
        Turn(row, row.pk, (row.api_key_id or 0, row.end_user), row.created_at, _digest(row))
        for row in ordered.iterator(chunk_size=2000)
    )
    return sessions_infer(turns)


def _inferred_record_break(record: UsageRecord, cards: dict[int, PriceCard] | None) -> CacheBreak | None:
    """The break at a record whose session is inferred: its key and end user's records of the
    day before it, chained."""
    recent = UsageRecord.objects.filter(
        INFERRABLE,
        team_id=record.team_id,
        api_key_id=record.api_key_id,
        end_user=record.end_user,
        created_at__gte=record.created_at - LOOKBACK,
        created_at__lte=record.created_at,
    ).exclude(created_at=record.created_at, id__gt=record.pk)
    for session, rows in _inferred(recent):
        if rows[-1].pk == record.pk:
            found = [b for b in session_breaks(session, _requests(rows, cards)) if b.record_id == record.pk]
            return found[0] if found else None
    return None


def _up_to(team_id: int, session: str, record_id: int, at: dt.datetime) -> QuerySet[UsageRecord]:
    """The session's records up to and including record `record_id`, created at `at`."""
    return UsageRecord.objects.filter(session_filter(session), team_id=team_id, created_at__lte=at).exclude(
        created_at=at, id__gt=record_id
    )


ANSWERED = (UsageStatus.OK, UsageStatus.CLIENT_DISCONNECTED)


def _answered(record: UsageRecord) -> bool:
    """The prompt was read (and so cached), even if the client left before the answer ended."""
    return record.status in ANSWERED and record.prompt_tokens > 0


def _requests(
    records: Iterable[UsageRecord], cards: dict[int, PriceCard] | None = None
) -> Iterator[SessionRequest]:
    cards = {} if cards is None else cards
    for record in records:
        card_id = record.price_card_id
        if card_id is not None and card_id not in cards:
            cards[card_id] = PriceCard.objects.get(pk=card_id)
        yield SessionRequest(
            record_id=record.pk,
            model_id=record.model_id,
            digest=_digest(record),
            affinity_key=record.affinity_key,
            prompt_tokens=record.prompt_tokens,
            cached_tokens=record.cached_tokens,
            succeeded=_answered(record),
            card=cards.get(card_id) if card_id is not None else None,
            created_at=record.created_at,
            connection_id=record.connection_id,
            routed=bool(record.route_rule) or record.route_fell_back,
        )


def _digest(record: UsageRecord) -> PrefixDigest | None:
    """The stored digest; for a record written before digests were kept, one from its body."""
    if record.prefix_digest is not None:
        return PrefixDigest.from_stored(record.prefix_digest)
    return prefix_digest(getattr(record, "body_if_undigested", None))


@dataclass(frozen=True)
class BreakShown:
    """A break as a page shows it: with the request before it and the diff of the changed section.
    `text` says why the diff may be missing or read differently: "" (both bodies kept as sent),
    `redacted` (placeholders compared without their salts), `not_kept` (a body holds no text)."""

    found: CacheBreak
    previous_request_id: str
    diff: list[DiffLine]
    text: str = ""

    @property
    def diff_not_kept(self) -> bool:
        """The cause names a section whose text a record did not keep: the page says so."""
        return self.text == NOT_KEPT and self.found.cause in SECTION_CAUSES


NOT_KEPT = "not_kept"
REDACTED = "redacted"


def break_shown(found: CacheBreak) -> BreakShown:
    """`found` with the request before it and the diff of the section that changed."""
    return breaks_shown([found])[found.record_id]


def breaks_shown(found: list[CacheBreak]) -> dict[int, BreakShown]:
    """Each break as shown, by the id of the record that broke: one query for every body."""
    ids = {each.record_id for each in found} | {each.previous_record_id for each in found}
    rows = {
        pk: (str(request_id), body, mode)
        for pk, request_id, body, mode in UsageRecord.objects.filter(pk__in=ids).values_list(
            "pk", "request_id", "request_body", "store_mode"
        )
    }
    missing: tuple[str, dict[str, Any] | None, str] = ("", None, StoreMode.FULL)
    shown = {}
    for each in found:
        previous, current = rows.get(each.previous_record_id, missing), rows.get(each.record_id, missing)
        modes = {previous[2], current[2]}
        text = NOT_KEPT if StoreMode.METADATA in modes else REDACTED if StoreMode.REDACTED in modes else ""
        shown[each.record_id] = BreakShown(
            found=each,
            previous_request_id=previous[0],
            diff=section_diff(each.cause, previous[1], current[1], redacted=text == REDACTED),
            text=text,
        )
    return shown
