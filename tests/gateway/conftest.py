"""Gateway fixtures: a team API key on a connection to the loopback fake upstream."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from playground.providers.models import ProviderConnection
from playground.usage.api_keys import api_key_issue
from playground.usage.models import ApiKey
from tests.support.actors import Actors


@dataclass(frozen=True)
class IssuedKey:
    key: ApiKey
    secret: str


@pytest.fixture
def gateway_key(actors: Actors, workers_connection: ProviderConnection) -> IssuedKey:
    key, secret = api_key_issue(
        team_id=actors.team.pk, name="billing-agent", connection_id=workers_connection.pk, created_by_id=actors.owner.pk
    )
    return IssuedKey(key, secret)
