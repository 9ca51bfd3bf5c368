"""Makes the loopback fake upstream (and the scripted resolver) available to every provider test."""

from __future__ import annotations

from tests.fakes.dns import fake_dns  # noqa: F401
from tests.fakes.fixtures import fake_upstream  # noqa: F401
