"""Sessions inferred at the gateway, so automatic affinity reaches clients that name none.

Most clients send neither `x-playground-session` nor `x-session-affinity`. For a key whose
policy has `auto_affinity` (or `sticky_sessions`), such a request is placed in a session by its
messages: each message is hashed into a chain (`h1 = H(m1)`, `hk = H(h(k-1), mk)`), and an
earlier request of the same key and end user whose whole chain is a prefix of this one's (the
messages sent before, then the answer and the new question, or tool results) names the
session; else the request starts one. Its own chain is then kept for the next turn, for
`OPEN_FOR` after it, in Django's cache (Redis in production: every web process sees it).

The cache-break detector infers sessions the same way at read time, from the records
(`usage.insights.session_inference`); this one decides the affinity key before the request is
sent, reading nothing but the cache.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from typing import Any

from django.core.cache import cache

from playground.usage.prefix_digest import body_messages

INFERRED = "inferred:"
OPEN_FOR_SECONDS = 30 * 60
# How many of the chain's prefixes are looked up, longest first: a turn adds an answer and a
# question, an agent's step a tool call and its results; far more than that is a new session.
LOOKBACK = 32


def session_inferred(*, key_id: int, end_user: str, body: Mapping[str, Any]) -> str:
    """The session of a request that names none (its messages extend a recent request's of the
    same key and end user), or a new one. "" for a body with no messages."""
    messages = body_messages(body)
    if not messages:
        return ""
    owner = f"routing:prefix:{key_id}:{hashlib.sha256(end_user.encode()).hexdigest()[:16]}:"
    chain = _chain(messages)
    earlier = [owner + link for link in reversed(chain[-LOOKBACK - 1 : -1])]
    found = cache.get_many(earlier) if earlier else {}
    session = next((found[name] for name in earlier if name in found), None)
    if not isinstance(session, str):
        session = f"{INFERRED}{key_id}:{uuid.uuid4().hex[:16]}"
    cache.set(owner + chain[-1], session, OPEN_FOR_SECONDS)
    return session


def _chain(messages: list[Any]) -> list[str]:
    """The hash of each prefix of `messages` (canonical JSON: a re-serialized equal message
    hashes the same)."""
    links, state = [], hashlib.blake2b(digest_size=16)
    for message in messages:
        state.update(json.dumps(message, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode())
        state.update(b"\0")
        links.append(state.copy().hexdigest())
    return links
