"""Team page fixtures: the shared actors (tests/support/actors.py) on a seeded catalogue."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def seeded_catalogue(catalogue: None) -> None:
    """The team pages read the catalogue, which a transactional test elsewhere may have flushed."""
