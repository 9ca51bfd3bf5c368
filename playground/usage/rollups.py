"""The rollup writer, beside the record writer: hour, day and conversation-day buckets, and
the gateway's buckets by API key and end user.

`rollup_add(record)` runs inside `usage_record_create`'s transaction, so a record and its
share of every rollup commit or roll back together. Each bucket is one upsert,
`INSERT ... ON CONFLICT (key) DO UPDATE SET n = n + excluded.n`, the same statement on SQLite
and PostgreSQL: concurrent writers of the same bucket serialize on its row and none of their
increments is lost (no read-modify-write in Python).

`rollups_rebuild()` recomputes every rollup from the raw rows with one
`INSERT ... SELECT ... GROUP BY` per table; a test proves it equal to the incremental path.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import (
    BigIntegerField,
    Case,
    Count,
    DecimalField,
    ExpressionWrapper,
    F,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce, Round, TruncDay, TruncHour

from playground.usage.models import (
    COST_SCALE,
    HISTOGRAM_EDGES_MS,
    LATENCY_COLUMNS,
    TTFT_COLUMNS,
    CacheState,
    TeamRetention,
    UsageConversationDaily,
    UsageConversationTotal,
    UsageDaily,
    UsageEndUserDaily,
    UsageEndUserHourly,
    UsageHourly,
    UsageKeyDaily,
    UsageKeyHourly,
    UsagePeopleDaily,
    UsagePeopleHourly,
    UsagePresetDaily,
    UsagePresetHourly,
    UsageRecord,
    UsageTeamDaily,
    UsageTeamHourly,
)
from playground.usage.statements.rollups import (
    BucketRow,
    Extremes,
    records_lock_against_writes,
    rollup_insert_select,
    rollups_upsert,
)

UTC = dt.UTC
COST_FIELDS = ("input_cost", "cached_input_cost", "cache_write_cost", "output_cost", "total_cost")
Truncation = type[TruncHour] | type[TruncDay]
# The full-key tables, one per bucket size, each built from the raw records.
FULL_KEY: tuple[tuple[type[Any], Truncation], ...] = (
    (UsageHourly, TruncHour),
    (UsageDaily, TruncDay),
)
# Coarser tables, each its full-key source summed over the dimensions it leaves out: the
# team-level ones over users and connections, the people ones over everything else.
SUMMED: tuple[tuple[type[Any], type[Any]], ...] = (
    (UsageTeamHourly, UsageHourly),
    (UsageTeamDaily, UsageDaily),
    (UsagePeopleHourly, UsageHourly),
    (UsagePeopleDaily, UsageDaily),
)
# The gateway's tables, which take only the records that name an API key or an end user
# (`ATTRIBUTED`): the end-user ones built from those records, the key ones summed from them.
ATTRIBUTED = Q(api_key__isnull=False) | ~Q(end_user="")
BY_END_USER: tuple[tuple[type[Any], Truncation], ...] = (
    (UsageEndUserHourly, TruncHour),
    (UsageEndUserDaily, TruncDay),
)
# The tables by preset version, built from the records that name one.
BY_PRESET: tuple[tuple[type[Any], Truncation], ...] = (
    (UsagePresetHourly, TruncHour),
    (UsagePresetDaily, TruncDay),
)
BY_KEY: tuple[tuple[type[Any], type[Any]], ...] = (
    (UsageKeyHourly, UsageEndUserHourly),
    (UsageKeyDaily, UsageEndUserDaily),
)


def _rollup_measures(model: type[Any]) -> tuple[str, ...]:
    return tuple(
        field.attname
        for field in model._meta.concrete_fields
        if field.attname not in model.DIMENSIONS and field.attname != "id"
    )


# The tables of buckets and their sums (every measure, or the counts, tokens and costs).
MEASURED_ROLLUPS: tuple[type[Any], ...] = tuple(
    model for model, _ in (*FULL_KEY, *SUMMED, *BY_END_USER, *BY_KEY, *BY_PRESET)
)
CONVERSATION_ROLLUPS: tuple[type[Any], ...] = (UsageConversationDaily, UsageConversationTotal)
# Every rollup table, the one list the tests compare and the dashboard benchmark counts:
# `rollup_add` and `rollups_rebuild` write the tables of the lists above, so a new rollup
# table goes into one of them.
ROLLUP_MODELS: tuple[type[Any], ...] = (*MEASURED_ROLLUPS, *CONVERSATION_ROLLUPS)
MEASURES_OF = {model: _rollup_measures(model) for model in MEASURED_ROLLUPS}
CONVERSATION_MEASURES = ("requests", "prompt_tokens", "cached_tokens", "completion_tokens", "total_cost_e10")


def histogram_bucket(ms: int) -> int:
    """The index of the fixed bucket that holds `ms` (see HISTOGRAM_EDGES_MS)."""
    index = 0
    for i, edge in enumerate(HISTOGRAM_EDGES_MS):
        if ms >= edge:
            index = i
    return index


def cache_state(cached_tokens: int | None) -> str:
    if cached_tokens is None:
        return CacheState.UNKNOWN
    return CacheState.HIT if cached_tokens > 0 else CacheState.MISS


def cost_e10(value: Decimal | int | float) -> int:
    """A stored cost (10 decimal places) as an integer of 1e-10 USD."""
    return int(Decimal(value).scaleb(10).to_integral_value())


def hour_start(at: dt.datetime) -> dt.datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def day_start(at: dt.datetime) -> dt.datetime:
    return at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


# --- incremental path -------------------------------------------------------------------


def rollup_add(record: UsageRecord) -> None:
    """Add one freshly written record to its buckets (call inside the record's transaction)."""
    rollups_add([record])


# A bucket's table and key (its dimensions and time, as sorted items).
BucketKey = tuple[type[Any], tuple[tuple[str, Any], ...]]


def rollups_add(records: Iterable[UsageRecord]) -> None:
    """Add freshly written records to their buckets (inside their transaction): one upsert per
    table for all its buckets, however many records fall into them, so records written together
    (`usage_records_create_many`) cost a few statements, not ten each, whatever the number of
    models, keys and members among them."""
    sums: dict[BucketKey, dict[str, int]] = {}
    spans: dict[BucketKey, tuple[dt.datetime, dt.datetime]] = {}  # a conversation's first and last day
    for record in records:
        for table, key, measures in _buckets(record):
            bucket = (table, tuple(sorted(key.items())))
            total = sums.setdefault(bucket, dict.fromkeys(measures, 0))
            for name, value in measures.items():
                total[name] += value
            if table is UsageConversationTotal:
                day = day_start(record.created_at)
                first, last = spans.get(bucket, (day, day))
                spans[bucket] = (min(first, day), max(last, day))
    rows: dict[type[Any], list[BucketRow]] = {}
    for (table, items), totals in sums.items():
        extremes: Extremes = {}
        if table is UsageConversationTotal:
            first, last = spans[(table, items)]
            extremes = {"first_bucket": (first, "<"), "last_bucket": (last, ">")}
        rows.setdefault(table, []).append((dict(items), totals, extremes))
    # Every writer in the same order, all the tables' statements at once (one round trip on PostgreSQL).
    rollups_upsert([(table, rows[table]) for table in sorted(rows, key=lambda model: model.__name__)])


def _buckets(record: UsageRecord) -> Iterator[tuple[type[Any], dict[str, Any], dict[str, int]]]:
    """Each rollup row `record` adds to: its table, its key, and what it adds."""
    measures = _measures(record)
    dimensions = {
        "team_id": record.team_id,
        "model_id": record.model_id,
        "price_card_id": record.price_card_id or 0,
        "user_id": record.user_id or 0,
        "connection_id": record.connection_id or 0,
        "path": record.path,
        "status": record.status,
        "affinity": bool(record.affinity_key),
        "cache_state": cache_state(record.cached_tokens),
        "api_key_id": record.api_key_id or 0,
        "end_user": record.end_user,
        "preset_version_id": record.preset_version_id or 0,
    }
    hour, day = hour_start(record.created_at), day_start(record.created_at)
    truncated = {TruncHour: hour, TruncDay: day}
    built, summed = FULL_KEY, SUMMED
    if record.api_key_id is not None or record.end_user:  # as `ATTRIBUTED`
        built, summed = (*built, *BY_END_USER), (*summed, *BY_KEY)
    if record.preset_version_id is not None:
        built = (*built, *BY_PRESET)
    buckets = {model: truncated[trunc] for model, trunc in built}
    tables = [*buckets.items(), *((table, buckets[source]) for table, source in summed)]
    for model, bucket in tables:
        key = {name: value for name, value in dimensions.items() if name in model.DIMENSIONS}
        yield model, {**key, "bucket": bucket}, {name: measures[name] for name in MEASURES_OF[model]}
    if record.conversation_id is not None:
        conversation_measures = {name: measures[name] for name in CONVERSATION_MEASURES}
        conversation = {"team_id": record.team_id, "conversation_id": record.conversation_id}
        yield UsageConversationDaily, {**conversation, "bucket": day}, conversation_measures
        yield UsageConversationTotal, conversation, conversation_measures


def _measures(record: UsageRecord) -> dict[str, int]:
    measures = {
        "requests": 1,
        "prompt_tokens": record.prompt_tokens,
        "cached_tokens": record.cached_tokens or 0,
        "cache_write_tokens": record.cache_write_tokens or 0,
        "completion_tokens": record.completion_tokens,
        **{f"{name}_e10": cost_e10(getattr(record, name)) for name in COST_FIELDS},
        "ttft_count": int(record.ttft_ms is not None),
        "ttft_sum_ms": record.ttft_ms or 0,
        "latency_count": int(record.latency_ms is not None),
        "latency_sum_ms": record.latency_ms or 0,
    }
    for columns, value in ((TTFT_COLUMNS, record.ttft_ms), (LATENCY_COLUMNS, record.latency_ms)):
        for column in columns:
            measures[column] = 0
        if value is not None:
            measures[columns[histogram_bucket(value)]] = 1
    return measures


# --- rebuild from raw rows ----------------------------------------------------------------


def rollups_rebuild(*, team_id: int | None = None) -> None:
    """Recompute every rollup (of one team, or all) from the raw usage records.

    One transaction: readers see the old rollups until it commits. On PostgreSQL the records
    table is locked against writes meanwhile (SHARE mode), so a record written during the
    rebuild is neither missed nor counted twice; SQLite has one writer anyway. A team whose
    older records were deleted by retention keeps its rollups from before then
    (`TeamRetention.records_removed_before`): only the buckets after are recomputed.
    """
    with transaction.atomic():
        records_lock_against_writes()
        kept_records, rebuilt = rollups_after_retention(team_id)
        records = UsageRecord.objects.filter(kept_records)
        if team_id is not None:
            records = records.filter(team_id=team_id)
        built = [(model, trunc, records) for model, trunc in FULL_KEY]
        built += [(model, trunc, records.filter(ATTRIBUTED)) for model, trunc in BY_END_USER]
        built += [
            (model, trunc, records.filter(preset_version_id__isnull=False)) for model, trunc in BY_PRESET
        ]
        for model, trunc, rows in built:
            _scoped(model, team_id).filter(rebuilt).delete()
            rollup_insert_select(model, _rollup_select(rows, model, trunc))
        # The coarser tables and the conversation totals are sums of the rows just rebuilt:
        # exact (integer sums), and far fewer rows to read than the raw records.
        for summed, source in (*SUMMED, *BY_KEY):
            _scoped(summed, team_id).filter(rebuilt).delete()
            measures = MEASURES_OF[summed]
            sources = _scoped(source, team_id).filter(rebuilt)
            rollup_insert_select(summed, _summed(sources, summed.DIMENSIONS, measures))
        _scoped(UsageConversationDaily, team_id).filter(rebuilt).delete()
        rollup_insert_select(UsageConversationDaily, _conversation_select(records))
        _scoped(UsageConversationTotal, team_id).delete()
        days = _scoped(UsageConversationDaily, team_id)
        totals = _summed(days, UsageConversationTotal.DIMENSIONS, CONVERSATION_MEASURES).annotate(
            r_first_bucket=Min("bucket"), r_last_bucket=Max("bucket")
        )
        rollup_insert_select(UsageConversationTotal, totals)


def rollups_after_retention(team_id: int | None) -> tuple[Q, Q]:
    """(the records, the rollup rows) a rebuild recomputes: all of them, but for a team whose
    records before a day were deleted by retention, only those from that day on."""
    horizons = TeamRetention.objects.filter(records_removed_before__isnull=False)
    if team_id is not None:
        horizons = horizons.filter(pk=team_id)
    cut = dict(horizons.values_list("pk", "records_removed_before"))
    if not cut:
        return Q(), Q()
    records, rows = ~Q(team_id__in=list(cut)), ~Q(team_id__in=list(cut))
    for team, since in cut.items():
        records |= Q(team_id=team, created_at__gte=since)
        rows |= Q(team_id=team, bucket__gte=since)
    return records, rows


def _summed(rows: QuerySet[Any], dimensions: Iterable[str], measures: Iterable[str]) -> QuerySet[Any]:
    """SELECT the dimensions as `r_<name>` and the SUM of each measure, grouped by the dimensions."""
    summed: QuerySet[Any] = (
        rows.order_by()
        .annotate(**{f"r_{name}": F(name) for name in dimensions})
        .values(*(f"r_{name}" for name in dimensions))
        .annotate(**{f"r_{name}": Sum(name) for name in measures})
    )
    return summed


def _scoped(model: type[Any], team_id: int | None) -> QuerySet[Any]:
    rows: QuerySet[Any] = model.objects.all()
    return rows if team_id is None else rows.filter(team_id=team_id)


def as_e10(name: str) -> Cast:
    """A record's cost column as an integer of 1e-10 USD, to be summed exactly (SQLite sums
    decimals as floats)."""
    scaled = ExpressionWrapper(F(name) * Value(Decimal(COST_SCALE)), output_field=DecimalField())
    return Cast(Round(scaled), BigIntegerField())


def _histogram(field: str, columns: Iterable[str]) -> dict[str, Any]:
    edges = list(HISTOGRAM_EDGES_MS)
    aggregates: dict[str, Any] = {}
    for i, column in enumerate(columns):
        condition = Q(**{f"{field}__gte": edges[i]})
        if i + 1 < len(edges):
            condition &= Q(**{f"{field}__lt": edges[i + 1]})
        aggregates[column] = Count("id", filter=condition)
    return aggregates


def _rollup_select(records: QuerySet[UsageRecord], model: type[Any], trunc: Truncation) -> QuerySet[Any]:
    """The records grouped by `model`'s dimensions, with its measures, as `r_<column>` aliases."""
    dimensions: dict[str, Any] = {
        "team_id": F("team_id"),
        "bucket": trunc("created_at", tzinfo=UTC),
        "model_id": F("model_id"),
        "price_card_id": Coalesce("price_card_id", 0),
        "user_id": Coalesce("user_id", 0),
        "connection_id": Coalesce("connection_id", 0),
        "path": F("path"),
        "status": F("status"),
        "affinity": Case(When(affinity_key="", then=Value(False)), default=Value(True)),
        "cache_state": Case(
            When(cached_tokens__isnull=True, then=Value(CacheState.UNKNOWN.value)),
            When(cached_tokens=0, then=Value(CacheState.MISS.value)),
            default=Value(CacheState.HIT.value),
        ),
        "api_key_id": Coalesce("api_key_id", 0),
        "end_user": F("end_user"),
        "preset_version_id": F("preset_version_id"),
    }
    measures: dict[str, Any] = {
        "requests": Count("id"),
        "prompt_tokens": Coalesce(Sum("prompt_tokens"), 0),
        "cached_tokens": Coalesce(Sum("cached_tokens"), 0),
        "cache_write_tokens": Coalesce(Sum("cache_write_tokens"), 0),
        "completion_tokens": Coalesce(Sum("completion_tokens"), 0),
        **{f"{name}_e10": Coalesce(Sum(as_e10(name)), 0) for name in COST_FIELDS},
        "ttft_count": Count("ttft_ms"),
        "ttft_sum_ms": Coalesce(Sum("ttft_ms"), 0),
        "latency_count": Count("latency_ms"),
        "latency_sum_ms": Coalesce(Sum("latency_ms"), 0),
        **_histogram("ttft_ms", TTFT_COLUMNS),
        **_histogram("latency_ms", LATENCY_COLUMNS),
    }
    grouped = {f"r_{name}": dimensions[name] for name in model.DIMENSIONS}
    summed = {f"r_{name}": measures[name] for name in MEASURES_OF[model]}
    rows: QuerySet[Any] = records.order_by().annotate(**grouped).values(*grouped).annotate(**summed)
    return rows


def _conversation_select(records: QuerySet[UsageRecord]) -> QuerySet[Any]:
    return (
        records.filter(conversation_id__isnull=False)
        .order_by()
        .annotate(
            r_team_id=F("team_id"),
            r_bucket=TruncDay("created_at", tzinfo=UTC),
            r_conversation_id=F("conversation_id"),
        )
        .values("r_team_id", "r_bucket", "r_conversation_id")
        .annotate(
            r_requests=Count("id"),
            r_prompt_tokens=Coalesce(Sum("prompt_tokens"), 0),
            r_cached_tokens=Coalesce(Sum("cached_tokens"), 0),
            r_completion_tokens=Coalesce(Sum("completion_tokens"), 0),
            r_total_cost_e10=Coalesce(Sum(as_e10("total_cost")), 0),
        )
    )
