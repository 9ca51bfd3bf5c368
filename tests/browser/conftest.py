"""Browser fixtures: Debian's headless Chromium (the live app is `tests/support/live.py`).

Chromium is Debian's (`/usr/bin/chromium`, installed by `make browser`); Playwright never
downloads a browser here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.conf import settings

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
