"""Whether this process can serve: the checks behind `/readyz` (`playground.probes`).

The database always (a query that also says whether an engine connection exists); Redis when
`REDIS_URL` is set (the channel layer, the cache and the rate limits live there); the Celery broker
(Redis, pinged once when it is the same server; the embedded profile's folder otherwise); and the
embedded engine's own `/healthz` when a team has an engine connection. The checks run at once, each
within `READYZ_TIMEOUT`; healthy, they take a few milliseconds in all.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import redis.asyncio as redis
from django.conf import settings

from playground.lib.db import connections_heal, db_run
from playground.providers.http import TimeoutPolicy, upstream_stream
from playground.providers.kinds import ConnectionKind
from playground.providers.models import ProviderConnection

REASON_CHARS = 200


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    ms: float
    reason: str = ""


async def readiness_checks() -> list[Check]:
    """Every dependency's check, in a stable order: database, redis, broker, engine."""
    engine_in_use = False

    async def database() -> None:
        nonlocal engine_in_use
        engine_in_use = await db_run(_database_query)

    pending: dict[str, Awaitable[Check]] = {"database": _timed("database", database)}
    redis_url, broker_url = settings.REDIS_URL, settings.CELERY_BROKER_URL
    if redis_url:
        pending["redis"] = _timed("redis", lambda: _redis_ping(redis_url))
    if not broker_url.startswith(("redis://", "rediss://")):
        pending["broker"] = _timed("broker", _broker_folder)
    elif broker_url != redis_url:
        pending["broker"] = _timed("broker", lambda: _redis_ping(broker_url))
    results = dict(zip(pending, await asyncio.gather(*pending.values()), strict=True))
    if "broker" not in results:  # the broker is the Redis just pinged
        results["broker"] = replace(results["redis"], name="broker")
    if engine_in_use:
        results["engine"] = await _timed("engine", _engine_health)
    return list(results.values())


async def _timed(name: str, check: Callable[[], Awaitable[None]]) -> Check:
    timeout = settings.READYZ_TIMEOUT
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            await check()
    except TimeoutError:
        return Check(name, False, _ms(started), f"no answer within {timeout:g} s")
    except Exception as exc:
        return Check(name, False, _ms(started), f"{type(exc).__name__}: {exc}"[:REASON_CHARS])
    return Check(name, True, _ms(started))


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _database_query() -> bool:
    """A real query (the connection alone could be a stale one), which also says whether a team
    has an engine connection."""
    connections_heal()
    return ProviderConnection.objects.filter(kind=ConnectionKind.ENGINE).exists()


async def _redis_ping(url: str) -> None:
    timeout = settings.READYZ_TIMEOUT
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        await client.ping()
    finally:
        await client.aclose()


async def _broker_folder() -> None:
    await asyncio.to_thread(_broker_folder_check)


def _broker_folder_check() -> None:
    folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])  # type: ignore[arg-type]
    if not (folder.is_dir() and os.access(folder, os.W_OK)):
        raise OSError(f"the broker's folder {folder} is missing or not writable")


async def _engine_health() -> None:
    timeout = settings.READYZ_TIMEOUT
    policy = TimeoutPolicy(connect=timeout, first_byte=timeout, total=timeout)
    headers = {"authorization": f"Bearer {settings.ENGINE_API_TOKEN}", "accept": "application/json"}
    async with upstream_stream(
        "GET", f"{settings.ENGINE_URL}/healthz", headers=headers, timeout_policy=policy
    ):
        pass  # any 2xx: the engine answers (a replica restarting leaves it "degraded", still serving)
