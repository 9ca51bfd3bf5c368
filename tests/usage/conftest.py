"""Usage fixtures: the loopback fake upstream."""

from __future__ import annotations

from tests.fakes.fixtures import fake_upstream  # noqa: F401
