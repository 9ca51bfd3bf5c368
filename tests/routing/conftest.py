"""Connections a routing policy names: two of the team's, on the fake upstream."""

from __future__ import annotations

import pytest

from playground.providers.models import ProviderConnection
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.connections import WORKERS_TOKEN, workers_connection_for

KIMI = "@cf/moonshotai/kimi-k2.5"
LLAMA = "@cf/meta/llama-3.1-8b-instruct"


@pytest.fixture
def primary(actors: Actors, fake_upstream: FakeUpstream, catalogue: None) -> ProviderConnection:
    return workers_connection_for(actors.team, fake_upstream, name="Primary", token=WORKERS_TOKEN)


@pytest.fixture
def backup(actors: Actors, fake_upstream: FakeUpstream, catalogue: None) -> ProviderConnection:
    return workers_connection_for(actors.team, fake_upstream, name="Backup", token=WORKERS_TOKEN)
