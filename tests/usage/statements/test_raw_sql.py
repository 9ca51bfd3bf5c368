"""`raw_sql.insert_many`, the records' group INSERT, writes what `bulk_create` writes."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from playground.usage.models import UsageRecord
from playground.usage.statements import raw_sql
from tests.support.actors import Actors
from tests.usage.statements.orm import column_values

pytestmark = pytest.mark.django_db(transaction=False)


def _record(actors: Actors, **fields: object) -> UsageRecord:
    return UsageRecord(
        team=actors.team,
        user=actors.owner,
        model_id="@cf/moonshotai/kimi-k2.5",
        prompt_tokens=1_234,
        cached_tokens=1_000,
        completion_tokens=56,
        total_cost=Decimal("0.0001234567"),
        input_cost=Decimal("0.0000001234"),
        raw_usage={"prompt_tokens": 1_234, "nested": {"a": [1, 2.5, None]}},
        request_body={"messages": [{"role": "user", "content": "é ✓"}]},
        ttft_ms=120,
        **fields,
    )


def _stored(record: UsageRecord) -> dict[str, object]:
    values = column_values(UsageRecord.objects.get(pk=record.pk))
    return {name: value for name, value in values.items() if name not in {"id", "request_id"}}


def test_insert_many_writes_what_bulk_create_writes_db_defaults_included(actors: Actors) -> None:
    ours = raw_sql.insert_many([_record(actors), _record(actors, end_user="alice", tags=",a,b,")])
    theirs = UsageRecord.objects.bulk_create(
        [_record(actors), _record(actors, end_user="alice", tags=",a,b,")]
    )
    assert all(record.pk is not None and not record._state.adding for record in ours)
    assert [record.pk for record in ours] == sorted(record.pk for record in ours)
    for mine, django in zip(ours, theirs, strict=True):
        stored, expected = _stored(mine), _stored(django)
        created = stored.pop("created_at"), expected.pop("created_at")
        assert stored == expected
        assert all(isinstance(moment, dt.datetime) and moment.tzinfo for moment in created)
    assert UsageRecord.objects.get(pk=ours[0].pk).schema_name == ""  # left to its db_default
