"""The `fake_upstream` fixture; see `tests.fakes.upstream` for its API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.upstream import FakeUpstream


@pytest.fixture
def fake_upstream() -> Iterator[FakeUpstream]:
    server = FakeUpstream()
    server.start()
    yield server
    server.stop()
