"""The hand-written hot statements (`lib.raw_sql`) see and write the values the ORM would."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest
from django.db.models import Model

from playground.lib import raw_sql
from playground.providers.models import ProviderConnection
from playground.usage.api_keys import api_key_for_secret, api_key_issue
from playground.usage.models import ApiKey, UsageRecord
from tests.support.actors import Actors

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


def _values(instance: Model) -> dict[str, object]:
    """Every column's value as loaded, non-editable ones included."""
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields}


def _stored(record: UsageRecord) -> dict[str, object]:
    values = _values(UsageRecord.objects.get(pk=record.pk))
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


def test_the_key_read_by_hand_equals_the_key_read_by_the_orm(actors: Actors) -> None:
    connection = ProviderConnection.objects.create(team=actors.team, name="Loopback", base_url="http://x/v1")
    key, secret = api_key_issue(
        team_id=actors.team.pk,
        name="ci",
        connection_id=connection.pk,
        created_by_id=actors.owner.pk,
        allowed_models=["@cf/moonshotai/kimi-k2.5"],
        monthly_budget_usd=Decimal("12.50"),
        expires_at=dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
    )
    ours = api_key_for_secret(secret)
    orm = ApiKey.objects.select_related("team", "connection").get(pk=key.pk)
    assert ours is not None and ours.connection is not None and orm.connection is not None
    assert _values(ours) == _values(orm)
    assert _values(ours.team) == _values(orm.team)
    assert _values(ours.connection) == _values(orm.connection)
    assert api_key_for_secret("pgk_" + uuid.uuid4().hex) is None


def test_a_key_whose_connection_was_deleted_reads_as_none(actors: Actors) -> None:
    key, secret = api_key_issue(team_id=actors.team.pk, name="ci", connection_id=None, created_by_id=None)
    found = api_key_for_secret(secret)
    assert found is not None and found.pk == key.pk and found.connection is None
