"""Analytics fixtures: the known usage rows of tests/support/analytics.py, the chat ones and the gateway's."""

from __future__ import annotations

import pytest

from tests.support.actors import Actors
from tests.support.analytics import GatewayKnown, Known, gateway_known_create, known_create


@pytest.fixture
def known(actors: Actors) -> Known:
    return known_create(actors)


@pytest.fixture
def gateway(known: Known, actors: Actors) -> GatewayKnown:
    """The gateway's known rows, beside the chat ones."""
    return gateway_known_create(actors)
