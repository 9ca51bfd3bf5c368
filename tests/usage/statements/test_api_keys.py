"""`statements.api_keys` loads a key, its team and its connection as `select_related` would."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest

from playground.providers.models import ProviderConnection
from playground.usage.api_keys import api_key_for_secret, api_key_issue
from playground.usage.models import ApiKey
from tests.support.actors import Actors
from tests.usage.statements.orm import column_values

pytestmark = pytest.mark.django_db(transaction=False)


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
    assert column_values(ours) == column_values(orm)
    assert column_values(ours.team) == column_values(orm.team)
    assert column_values(ours.connection) == column_values(orm.connection)
    assert api_key_for_secret("pgk_" + uuid.uuid4().hex) is None


def test_a_key_whose_connection_was_deleted_reads_as_none(actors: Actors) -> None:
    key, secret = api_key_issue(team_id=actors.team.pk, name="ci", connection_id=None, created_by_id=None)
    found = api_key_for_secret(secret)
    assert found is not None and found.pk == key.pk and found.connection is None
