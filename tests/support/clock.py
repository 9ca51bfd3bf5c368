"""A stopped clock for tests, through time-machine: Django's `timezone.now()` and everything
else that reads the time (`datetime.now()`, `time.time()`; not `time.monotonic()`) says `at`,
in every thread, until the block ends."""

from __future__ import annotations

import datetime as dt

import time_machine


def clock(at: dt.datetime) -> time_machine.travel:
    """Use as `with clock(at):`; the clock does not tick, so what is written inside is stamped `at`."""
    return time_machine.travel(at, tick=False)
