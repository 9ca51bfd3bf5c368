"""Request-log reads of raw usage records: filtered, sorted, keyset-paginated, scoped.

No OFFSET anywhere: a page ends with a cursor (the last row's sort value and id) and the
next page starts strictly after it, so page 1,000 costs what page 1 costs. Every sort
walks one of the records' (team, column, id) indexes.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django.contrib.auth.models import User
from django.db.models import CharField, F, Func, Q, QuerySet, TextField, Value
from django.db.models.functions import Cast, StrIndex

from playground.accounts.selectors import AnyUser
from playground.analytics.filters import Filters
from playground.analytics.json_text import json_text_readable
from playground.catalog.models import PriceCard
from playground.providers.models import ProviderConnection
from playground.usage.models import ApiKey, Score, ScoreKind, UsageRecord

PAGE_SIZE = 50
EXPORT_CHUNK = 5000
# sort key -> (column, descending)
SORT_COLUMNS: dict[str, tuple[str, bool]] = {
    "newest": ("created_at", True),
    "oldest": ("created_at", False),
    "cost": ("total_cost", True),
    "latency": ("latency_ms", True),
    "ttft": ("ttft_ms", True),
    "prompt": ("prompt_tokens", True),
}
NULLABLE = {"latency_ms", "ttft_ms"}


class BadCursor(ValueError):
    pass


def log_records(filters: Filters) -> QuerySet[UsageRecord]:
    """The filtered records of the filters' team and period (the team is the caller's: see filters)."""
    records = UsageRecord.objects.filter(
        team=filters.team,
        created_at__gte=filters.period.start,
        created_at__lt=filters.period.end,
        **filters.column_lookups(),
        **filters.attribution_lookups(),
    )
    if filters.session:
        records = records.filter(session=filters.session)
    if filters.route_rule:
        records = records.filter(route_rule=filters.route_rule)
    if filters.route_outcome == "fell_back":
        records = records.filter(route_fell_back=True)
    elif filters.route_outcome == "downgraded":
        records = records.filter(route_downgraded=True)
    if filters.tag:
        # Tags are stored as ",a,b,", so one tag is ",a," inside them. StrIndex (strpos, instr)
        # matches case and all on both databases, where SQLite's LIKE would ignore case.
        records = records.alias(tag_at=StrIndex("tags", Value(f",{filters.tag},"))).filter(tag_at__gt=0)
    if filters.affinity:
        records = (
            records.exclude(affinity_key="") if filters.affinity == "on" else records.filter(affinity_key="")
        )
    if filters.conversation_id:
        records = records.filter(conversation_id=filters.conversation_id)
    if filters.preset_version_id:
        records = records.filter(preset_version_id=filters.preset_version_id)
    if filters.score:
        records = records.filter(pk__in=_scored(filters).values("record_id"))
    match filters.cached_share:
        case "none":
            records = records.filter(cached_tokens=0)
        case "some":
            records = records.alias(doubled=F("cached_tokens") * 2).filter(
                cached_tokens__gt=0, doubled__lt=F("prompt_tokens")
            )
        case "most":
            records = records.alias(doubled=F("cached_tokens") * 2).filter(
                cached_tokens__gt=0, doubled__gte=F("prompt_tokens")
            )
        case "unknown":
            records = records.filter(cached_tokens__isnull=True)
    return records


def _scored(filters: Filters) -> QuerySet[Score]:
    """The team's scores the score filter asks for (their index leads with team, kind, value)."""
    scores = Score.objects.filter(team=filters.team)
    if filters.score == "up":
        return scores.filter(kind=ScoreKind.THUMBS, value=1)
    if filters.score == "down":
        return scores.filter(kind=ScoreKind.THUMBS, value=0)
    if filters.score.startswith("rating_le_"):
        return scores.filter(kind=ScoreKind.RATING, value__lte=int(filters.score.removeprefix("rating_le_")))
    return scores


def _ordered(records: QuerySet[UsageRecord], sort: str) -> QuerySet[UsageRecord]:
    column, descending = SORT_COLUMNS[sort]
    if column not in NULLABLE:
        # Plain ORDER BY, so PostgreSQL walks the (team, column, id) index; "NULLS LAST" on a
        # descending walk would not match the index and sort the whole range instead.
        return records.order_by(f"-{column}", "-id") if descending else records.order_by(column, "id")
    if descending:
        return records.order_by(F(column).desc(nulls_last=True), "-id")
    return records.order_by(F(column).asc(nulls_last=True), "id")


def _after(records: QuerySet[UsageRecord], sort: str, value: Any, last_id: int) -> QuerySet[UsageRecord]:
    """Rows strictly after (value, last_id) in the sort order, NULLs last."""
    column, descending = SORT_COLUMNS[sort]
    beyond = "lt" if descending else "gt"
    if value is None:  # already among the NULLs, ordered by id
        return records.filter(**{f"{column}__isnull": True, f"id__{beyond}": last_id})
    condition = Q(**{f"{column}__{beyond}": value}) | Q(**{column: value, f"id__{beyond}": last_id})
    if column in NULLABLE:
        condition |= Q(**{f"{column}__isnull": True})
        return records.filter(condition)
    # The redundant bound lets the index scan start at the cursor (an OR alone cannot bound it).
    return records.filter(condition, **{f"{column}__{beyond}e": value})


@dataclass(frozen=True)
class LogPage:
    records: list[UsageRecord]
    next_cursor: str  # "" on the last page


def log_page(filters: Filters, *, cursor: str = "", size: int = PAGE_SIZE) -> LogPage:
    records = log_records(filters)
    if cursor:
        value, last_id = decode_cursor(cursor, filters.sort)
        records = _after(records, filters.sort, value, last_id)
    ordered = _ordered(records, filters.sort).select_related("user", "connection", "price_card", "api_key")
    page = list(ordered[: size + 1])
    more = len(page) > size
    page = page[:size]
    return LogPage(records=page, next_cursor=encode_cursor(page[-1], filters.sort) if more and page else "")


def encode_cursor(record: UsageRecord, sort: str) -> str:
    column, _ = SORT_COLUMNS[sort]
    value = getattr(record, column)
    if isinstance(value, dt.datetime):
        value = value.isoformat()
    elif isinstance(value, Decimal):
        value = str(value)
    raw = json.dumps([value, record.pk]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, sort: str) -> tuple[Any, int]:
    """(sort value, id) from a cursor; BadCursor for anything we did not make."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value, last_id = json.loads(raw)
        if not isinstance(last_id, int) or isinstance(last_id, bool):
            raise BadCursor("bad id")
        column, _ = SORT_COLUMNS[sort]
        if value is None:
            return None, last_id
        if column == "created_at":
            return dt.datetime.fromisoformat(value), last_id
        if column == "total_cost":
            return Decimal(value), last_id
        if isinstance(value, int) and not isinstance(value, bool):
            return value, last_id
    except (ValueError, TypeError, binascii.Error, InvalidOperation, json.JSONDecodeError) as exc:
        raise BadCursor(str(exc)) from exc
    raise BadCursor("bad value")


def usage_record_get(*, user: AnyUser, request_id: str) -> UsageRecord | None:
    """A record of one of the user's teams, or None (callers answer 404)."""
    if not user.is_authenticated:
        return None
    return (
        UsageRecord.objects.filter(request_id=request_id, team__memberships__user_id=user.pk)
        .select_related("team", "user", "connection", "price_card", "price_card__model", "api_key")
        .first()
    )


def export_chunks(filters: Filters, *, chunk: int = EXPORT_CHUNK) -> Iterator[list[dict[str, Any]]]:
    """The filtered log, newest first, in keyset chunks (flat memory whatever the row count)."""
    records = log_records(filters)
    columns = [field for field in EXPORT_FIELDS if "__" not in field and field not in EXPORT_COMPUTED]
    lookups = _ExportLookups(team_slug=filters.team.slug)
    after: tuple[dt.datetime, int] | None = None
    while True:
        page = records
        if after is not None:
            # The redundant `lte` bounds the index scan at the cursor; without it every chunk
            # would walk the index again from the newest row (quadratic in the export's size).
            page = page.filter(
                Q(created_at__lt=after[0]) | Q(created_at=after[0], id__lt=after[1]), created_at__lte=after[0]
            )
        # No join in the chunk query: with joins PostgreSQL may hash-join and sort the whole
        # range for every chunk. Names and cards come from small lookups, cached across chunks.
        rows = list(page.order_by("-created_at", "-id").values(*columns, **EXPORT_COMPUTED)[:chunk])
        if not rows:
            return
        lookups.fill(rows)
        yield rows
        after = (rows[-1]["created_at"], rows[-1]["id"])
        if len(rows) < chunk:
            return


class _ExportLookups:
    """The joined columns of an export (team, user, connection, API key, price card), fetched once
    per id; and the metadata's JSON text made readable (`json_text_readable`)."""

    CARD_FIELDS = (
        "label", "effective_from", "input_per_m", "cached_input_per_m", "cache_write_input_per_m",
        "output_per_m",
    )  # fmt: skip

    def __init__(self, *, team_slug: str) -> None:
        self.team_slug = team_slug
        self.users: dict[int, str] = {}
        self.connections: dict[int, str] = {}
        self.keys: dict[int, tuple[str, str]] = {}
        self.cards: dict[int, dict[str, Any]] = {}

    def fill(self, rows: list[dict[str, Any]]) -> None:
        self._load(
            rows,
            "user_id",
            self.users,
            lambda ids: User.objects.filter(pk__in=ids).values_list("pk", "username"),
        )
        self._load(
            rows,
            "connection_id",
            self.connections,
            lambda ids: ProviderConnection.objects.filter(pk__in=ids).values_list("pk", "name"),
        )
        self._load(
            rows,
            "api_key_id",
            self.keys,
            lambda ids: ((pk, (name, prefix)) for pk, name, prefix in _key_names(ids)),
        )
        missing = {row["price_card_id"] for row in rows} - set(self.cards) - {None}
        for card in PriceCard.objects.filter(pk__in=missing).values("pk", *self.CARD_FIELDS):
            self.cards[card["pk"]] = card
        empty = dict.fromkeys(self.CARD_FIELDS)
        for row in rows:
            row["team__slug"] = self.team_slug
            row["user__username"] = self.users.get(row["user_id"])
            row["connection__name"] = self.connections.get(row["connection_id"])
            row["api_key__name"], row["api_key__prefix"] = self.keys.get(row["api_key_id"], (None, None))
            if row["metadata_json"] is not None:
                row["metadata_json"] = json_text_readable(row["metadata_json"])
            card = self.cards.get(row["price_card_id"], empty)
            for name in self.CARD_FIELDS:
                row[f"price_card__{name}"] = card[name]

    @staticmethod
    def _load(rows: list[dict[str, Any]], key: str, cache: dict[int, Any], fetch: Any) -> None:
        missing = {row[key] for row in rows} - set(cache) - {None}
        if missing:
            cache.update(dict(fetch(missing)))


def _key_names(ids: set[int]) -> QuerySet[ApiKey, tuple[int, str, str]]:
    """Keys' names and prefixes: never their secret's hash."""
    return ApiKey.objects.filter(pk__in=ids).values_list("pk", "name", "prefix")


# Export columns made in SQL, the same on both databases and inside PostgreSQL's COPY
# (`exports.copy_sql`): the tags as "a,b" (stored as ",a,b,"), the metadata as the database's
# own JSON text (its numbers as stored, which a float in Python could round).
EXPORT_COMPUTED: dict[str, Any] = {
    "tag_list": Func(F("tags"), Value(","), function="TRIM", output_field=CharField()),
    "metadata_json": Cast("metadata", output_field=TextField()),
}
# The stored fields an export reads (no secret lives on a usage record; request bodies are
# left out: they are large and hold the prompt text).
EXPORT_FIELDS = (
    "id",
    "request_id",
    "created_at",
    "team__slug",
    "user_id",
    "user__username",
    "connection_id",
    "connection__name",
    "model_id",
    "path",
    "status",
    "streamed",
    "affinity_key",
    "conversation_id",
    "preset_version_id",
    "source",
    "api_key_id",
    "api_key__name",
    "api_key__prefix",
    "end_user",
    "session",
    "tag_list",
    "metadata_json",
    "trace_id",
    "prompt_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "usage_source",
    "usage_implausible",
    "price_card_id",
    "price_card__label",
    "price_card__effective_from",
    "price_card__input_per_m",
    "price_card__cached_input_per_m",
    "price_card__cache_write_input_per_m",
    "price_card__output_per_m",
    "input_cost",
    "cached_input_cost",
    "cache_write_cost",
    "output_cost",
    "total_cost",
    "ttft_ms",
    "latency_ms",
    "upstream_request_id",
    "http_status",
    "error_code",
    "error_text",
)
