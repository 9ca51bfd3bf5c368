"""Automatic affinity: a key derived from team and session for clients that send none."""

from __future__ import annotations

import hashlib


def session_affinity_key(team_id: int, session: str) -> str:
    """Stable for a session of a team (every attempt and every later request of the session send
    it, so they reach the instance holding its prefix), and tells nothing of the session id."""
    return "pg-" + hashlib.sha256(f"{team_id}\0{session}".encode()).hexdigest()[:40]
