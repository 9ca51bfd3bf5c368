"""The cache-break detector over stored records: at one record (when it is written), or over a
team's period (`team_breaks`, the rebuild's replay); and a break as a page shows it.

What the pages, the chart and the command read is kept by `cache_break_store`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
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


def detected_breaks(
    records: Sequence[UsageRecord], cards: dict[int, PriceCard] | None = None
) -> list[CacheBreak]:
    """The breaks at `records`, each where its session broke there, against the session's
    requests before it (`cache_break_store` keeps them when the records are written), read for
    all of them in one query: a settled group costs one look-up, not one per record. Each
    `turn` counts from the first request read; `with_turn` counts it from the session's start.
    `cards`: price cards already at hand, by id."""
    looked_up = [(record, _before(record)) for record in records]
    wanted = [(record, before) for record, before in looked_up if before is not None]
    if not wanted:
        return []
    # Each record's rows by its own indexed look-up, all of them in one statement.
    first, *others = [before for _, before in wanted]
    read = list(
        UsageRecord.objects.filter(pk__in=first.union(*others, all=True) if others else first)
        .order_by("created_at", "id")
        .only(*FIELDS, "team_id")
        .annotate(body_if_undigested=BODY_IF_UNDIGESTED)
    )
    found = []
    for record, _ in wanted:
        each = _break_at(record, [row for row in read if _precedes(row, record)], cards)
        if each is not None:
            found.append(each)
    return found


def _inferrable(record: UsageRecord) -> bool:
    """Whether `record`'s session is inferred (as `INFERRABLE`): a key's request naming none."""
    return record.conversation_id is None and not record.session and record.api_key_id is not None


def _record_session(record: UsageRecord) -> str:
    return session_key(
        conversation_id=record.conversation_id, session=record.session, affinity_key=record.affinity_key
    )


def _before(record: UsageRecord) -> QuerySet[UsageRecord, int] | None:
    """The ids of the records `_break_at` compares `record` with (None: it has no session): its
    session's last `RECENT` up to it; an inferred one's, its key and end user's of the day before."""
    since = record.created_at - LOOKBACK
    if _inferrable(record):
        return (
            UsageRecord.objects.filter(
                INFERRABLE,
                team_id=record.team_id,
                api_key_id=record.api_key_id,
                end_user=record.end_user,
                created_at__gte=since,
                created_at__lte=record.created_at,
            )
            .exclude(created_at=record.created_at, id__gt=record.pk)
            .values_list("pk", flat=True)
        )
    session = _record_session(record)
    if not session:
        return None
    recent = _up_to(record.team_id, session, record.pk, record.created_at).filter(created_at__gte=since)
    # Not sliced itself: a sliced query cannot be a part of a UNION on SQLite.
    return UsageRecord.objects.filter(
        pk__in=recent.order_by("-created_at", "-id").values("pk")[:RECENT]
    ).values_list("pk", flat=True)


def _precedes(row: UsageRecord, record: UsageRecord) -> bool:
    """Whether `row` is one of `_before(record)`'s but for the `RECENT` cut, which `_break_at` makes."""
    if row.team_id != record.team_id or (row.created_at, row.pk) > (record.created_at, record.pk):
        return False
    if row.created_at < record.created_at - LOOKBACK:
        return False
    if _inferrable(record):
        return _inferrable(row) and (row.api_key_id, row.end_user) == (record.api_key_id, record.end_user)
    return _record_session(row) == _record_session(record)


def _break_at(
    record: UsageRecord, before: list[UsageRecord], cards: dict[int, PriceCard] | None
) -> CacheBreak | None:
    """The break at `record` among `before`, its session's requests up to it, oldest first."""
    if _inferrable(record):
        for session, rows in _chained(before):
            if rows[-1].pk == record.pk:
                return _break_of(record, session, rows, cards)
        return None
    # The request before it (skipping back over a few failed ones) decides.
    return _break_of(record, _record_session(record), before[-RECENT:], cards)


def _break_of(
    record: UsageRecord, session: str, rows: list[UsageRecord], cards: dict[int, PriceCard] | None
) -> CacheBreak | None:
    found = [b for b in session_breaks(session, _requests(rows, cards)) if b.record_id == record.pk]
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
    return _chained(ordered.iterator(chunk_size=2000))


def _chained(rows: Iterable[UsageRecord]) -> list[tuple[str, list[UsageRecord]]]:
    """`rows` (by key, end user and time) chained into inferred sessions."""
    turns = (
        Turn(row, row.pk, (row.api_key_id or 0, row.end_user), row.created_at, _digest(row)) for row in rows
    )
    return sessions_infer(turns)


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
