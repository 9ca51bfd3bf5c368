"""Cooldowns: a target that failed `failures` times in a row cools for `seconds`, a success
forgets its failures, and (with Redis) a cooldown counted in one web process holds in another."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from playground.routing.cooldown import target_failed, target_health, target_succeeded
from playground.routing.plan import Cooldown, Target

ROOT = Path(__file__).resolve().parents[2]
TARGET = Target(connection_id=7, connection_name="Primary", model="@cf/moonshotai/kimi-k2.5")


def test_a_target_cools_after_its_failures_in_a_row_and_a_success_forgets_them() -> None:
    cooldown = Cooldown(failures=2, seconds=60)
    assert not asyncio.run(target_failed(TARGET, cooldown))
    asyncio.run(target_succeeded(TARGET))  # the count starts again
    assert not asyncio.run(target_failed(TARGET, cooldown))
    assert not target_health(TARGET).cooling and target_health(TARGET).failing
    assert asyncio.run(target_failed(TARGET, cooldown))
    assert target_health(TARGET).cooling
    assert not target_health(Target(8, "Backup", TARGET.model)).cooling


def test_a_cooldown_counted_in_another_process_holds_here(settings: Any) -> None:
    """Two web processes share Redis (production): the other process's failures cool the
    target for this one."""
    redis_url = os.environ.get("REDIS_URL", "")
    if not redis_url:
        pytest.skip("no Redis configured (REDIS_URL): run in the services profile")
    prefix = settings.CACHES["default"]["KEY_PREFIX"]
    script = textwrap.dedent(
        f"""
        import asyncio, django
        from django.conf import settings
        django.setup()
        settings.CACHES["default"]["KEY_PREFIX"] = {prefix!r}
        from playground.routing.cooldown import target_failed
        from playground.routing.plan import Cooldown, Target
        target = Target({TARGET.connection_id}, {TARGET.connection_name!r}, {TARGET.model!r})
        for _ in range(3):
            cooled = asyncio.run(target_failed(target, Cooldown(failures=3, seconds=60)))
        print("cooled" if cooled else "not cooled")
        """
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "REDIS_URL": redis_url}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "cooled"
    assert target_health(TARGET).cooling
