"""Analytics fixtures: the known usage rows of tests/support/analytics.py."""

from __future__ import annotations

import pytest

from tests.support.actors import Actors
from tests.support.analytics import Known, known_create


@pytest.fixture
def known(actors: Actors) -> Known:
    return known_create(actors)
