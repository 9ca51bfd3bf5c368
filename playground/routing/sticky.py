"""Sticky sessions: a session's later requests go where its first one was answered.

Kept in Django's cache (shared by all web processes in production) for `STICKY_SECONDS` after
the session's last answer, by team and session id; `routing.resolve` honours it while the
target is healthy.
"""

from __future__ import annotations

import hashlib

from django.core.cache import cache

from playground.routing.plan import Target

STICKY_SECONDS = 3600


def _key(team_id: int, session: str) -> str:
    return f"routing:sticky:{team_id}:{hashlib.sha256(session.encode()).hexdigest()[:32]}"


def sticky_target(team_id: int, session: str) -> Target | None:
    value = cache.get(_key(team_id, session))
    return Target(*value) if isinstance(value, tuple) and len(value) == 3 else None


async def sticky_keep(team_id: int, session: str, target: Target) -> None:
    await cache.aset(
        _key(team_id, session), (target.connection_id, target.connection_name, target.model), STICKY_SECONDS
    )
