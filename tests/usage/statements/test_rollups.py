"""`statements.rollups` writes the rows the ORM would write, and locks the records on PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection, transaction
from django.db.models import Count, F, Sum
from django.db.models.functions import Coalesce, TruncDay
from django.test.utils import CaptureQueriesContext

from playground.usage.models import UsageConversationDaily, UsageConversationTotal, UsageRecord
from playground.usage.rollups import as_e10
from playground.usage.statements.rollups import (
    BucketRow,
    records_lock_against_writes,
    rollup_insert_select,
    rollup_upsert,
    rollup_upsert_many,
)
from tests.support.actors import Actors
from tests.usage.statements.orm import column_values

pytestmark = pytest.mark.django_db(transaction=False)

DAY = dt.datetime(2026, 5, 4, tzinfo=dt.UTC)


def _row(
    model: type[UsageConversationTotal] | type[UsageConversationDaily], **key: object
) -> dict[str, object]:
    values = column_values(model.objects.get(**key))
    return {name: value for name, value in values.items() if name not in {"id", "conversation_id"}}


def _rows() -> list[tuple[tuple[str, object], ...]]:
    """Every conversation-day row's columns but its id, in a stable order."""
    return sorted(
        tuple(sorted((name, value) for name, value in column_values(row).items() if name != "id"))
        for row in UsageConversationDaily.objects.all()
    )


def test_upserts_of_one_bucket_add_up_to_the_row_the_orm_would_create(actors: Actors) -> None:
    team = actors.team.pk
    adds = [
        (
            {
                "requests": 1,
                "prompt_tokens": 10,
                "cached_tokens": 0,
                "completion_tokens": 5,
                "total_cost_e10": 7,
            },
            DAY,
        ),
        (
            {
                "requests": 2,
                "prompt_tokens": 3,
                "cached_tokens": 9,
                "completion_tokens": 0,
                "total_cost_e10": 0,
            },
            DAY - dt.timedelta(days=2),
        ),
        (
            {
                "requests": 1,
                "prompt_tokens": 0,
                "cached_tokens": 1,
                "completion_tokens": 8,
                "total_cost_e10": 5,
            },
            DAY + dt.timedelta(days=1),
        ),
    ]
    for measures, day in adds:
        rollup_upsert(
            UsageConversationTotal,
            {"team_id": team, "conversation_id": 1},
            measures,
            extremes={"first_bucket": (day, "<"), "last_bucket": (day, ">")},
        )
    days = [day for _, day in adds]
    UsageConversationTotal.objects.create(
        team_id=team,
        conversation_id=2,
        first_bucket=min(days),
        last_bucket=max(days),
        **{name: sum(measures[name] for measures, _ in adds) for name in adds[0][0]},
    )
    assert _row(UsageConversationTotal, conversation_id=1) == _row(UsageConversationTotal, conversation_id=2)


def test_one_statement_for_several_buckets_writes_what_one_upsert_each_writes(actors: Actors) -> None:
    """New buckets and existing ones mixed, given out of key order, each with its own extremes:
    conversations 1-3 are written in one statement, 11-13 one by one, and the rows are equal."""
    team = actors.team.pk

    def bucket(conversation: int, day: dt.datetime, requests: int) -> BucketRow:
        measures = {
            "requests": requests,
            "prompt_tokens": 10 * requests,
            "cached_tokens": 0,
            "completion_tokens": requests,
            "total_cost_e10": 3 * requests,
        }
        return (
            {"team_id": team, "conversation_id": conversation},
            measures,
            {
                "first_bucket": (day, "<"),
                "last_bucket": (day, ">"),
            },
        )

    for base in (0, 10):  # conversation 2 (and 12) exists before
        rollup_upsert(
            UsageConversationTotal, *bucket(base + 2, DAY, 1)[:2], extremes=bucket(base + 2, DAY, 1)[2]
        )
    rows = [
        bucket(3, DAY + dt.timedelta(days=1), 4),
        bucket(1, DAY, 2),
        bucket(2, DAY - dt.timedelta(days=3), 5),
    ]

    with CaptureQueriesContext(connection) as queries:
        rollup_upsert_many(UsageConversationTotal, rows)
    for keys, measures, extremes in rows:
        moved = {**keys, "conversation_id": keys["conversation_id"] + 10}
        rollup_upsert(UsageConversationTotal, moved, measures, extremes=extremes)

    assert len(queries.captured_queries) == 1
    for conversation in (1, 2, 3):
        assert _row(UsageConversationTotal, conversation_id=conversation) == _row(
            UsageConversationTotal, conversation_id=conversation + 10
        )
    two = UsageConversationTotal.objects.get(conversation_id=2)
    assert (two.requests, two.first_bucket, two.last_bucket) == (6, DAY - dt.timedelta(days=3), DAY)


def test_an_insert_of_a_grouped_select_writes_the_rows_bulk_create_writes(actors: Actors) -> None:
    for group, hours in ((1, (1, 2, 30)), (2, (5,))):  # the group stands for a conversation
        for hour in hours:
            record = UsageRecord.objects.create(
                team=actors.team,
                model_id="m",
                prompt_tokens=hour,
                completion_tokens=group,
                cached_tokens=hour % 2,
            )
            UsageRecord.objects.filter(pk=record.pk).update(created_at=DAY + dt.timedelta(hours=hour))
    select = (
        UsageRecord.objects.order_by()
        .annotate(
            r_team_id=F("team_id"),
            r_bucket=TruncDay("created_at", tzinfo=dt.UTC),
            r_conversation_id=F("completion_tokens"),
        )
        .values("r_team_id", "r_bucket", "r_conversation_id")
        .annotate(
            r_requests=Count("id"),
            r_prompt_tokens=Sum("prompt_tokens"),
            r_completion_tokens=Sum("completion_tokens"),
            r_cached_tokens=Coalesce(Sum("cached_tokens"), 0),
            r_total_cost_e10=Coalesce(Sum(as_e10("total_cost")), 0),
        )
    )

    rollup_insert_select(UsageConversationDaily, select)
    ours = _rows()
    UsageConversationDaily.objects.all().delete()
    UsageConversationDaily.objects.bulk_create(
        [
            UsageConversationDaily(**{name.removeprefix("r_"): value for name, value in row.items()})
            for row in select
        ]
    )
    theirs = _rows()

    assert ours == theirs and len(ours) == 3  # group 1 over two days, group 2 on one


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="SQLite has one writer: there is nothing to lock"
)
def test_the_rebuild_lock_holds_the_records_table_in_share_mode() -> None:
    with transaction.atomic():
        records_lock_against_writes()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT mode FROM pg_locks WHERE relation = %s::regclass AND pid = pg_backend_pid()",
                [UsageRecord._meta.db_table],
            )
            modes = {mode for (mode,) in cursor.fetchall()}
    assert "ShareLock" in modes
