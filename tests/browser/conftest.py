"""Browser fixtures: Debian's headless Chromium (the live app is `tests/support/live.py`).

Chromium is Debian's (`/usr/bin/chromium`, installed by `make browser`); Playwright never
downloads a browser here.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings, settings

from tests.support.browser import CHROMIUM

ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = shutil.which("chromium") or CHROMIUM
    if not Path(path).exists():
        pytest.fail("Debian's chromium is missing: run `make browser` (apt-get install chromium)")
    return path


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def celery_worker_thread(settings: LazySettings) -> Iterator[None]:
    from celery.contrib.testing.worker import start_worker

    from playground.celery import app

    saved = (app.conf.broker_url, app.conf.task_always_eager)
    settings.CELERY_TASK_ALWAYS_EAGER = False
    _broker_use(app, "memory://", eager=False)
    try:
        with start_worker(
            app, pool="solo", perform_ping_check=False, loglevel="WARNING", shutdown_timeout=10
        ):
            yield
    finally:
        _broker_use(app, saved[0], eager=saved[1])


def _broker_use(app: Any, url: str, *, eager: bool) -> None:  # Any: the pools are private (no public reset)
    """Point the app at `url`. The pools an earlier test made (even an eager task acquires a
    producer) still point at the old broker, and producers would publish there while the
    worker reads `url`: the batch then waited at 0 % in a whole-suite run. They are dropped,
    not closed: kombu keeps producer pools per broker URL, and a later test on the old URL
    gets the same pool back."""
    app.conf.update(broker_url=url, task_always_eager=eager)
    app._pool = None
    app.amqp._producer_pool = None
