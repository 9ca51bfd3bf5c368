"""Makes the loopback fake upstream available to every provider test."""

from __future__ import annotations

from tests.fakes.fixtures import fake_upstream  # noqa: F401
