"""Sessions inferred at the gateway, so automatic affinity reaches clients that name none.

Most clients send neither `x-playground-session` nor `x-session-affinity`. For a key whose
policy has `auto_affinity` (or `sticky_sessions`), such a request is placed in a session named
by how its conversation opened: the messages up to and including the first user message (the
system prompt and the first question), hashed with the key and the end user. Every later turn
of that conversation sends the same opening, so it names the same session; interleaved
conversations that opened differently stay apart; two that opened alike share a prefix anyway.
Nothing is stored or read: it costs a hash of the opening, whatever the traffic.

The cache-break detector infers sessions from the records at read time
(`usage.insights.session_inference`), which also follows an edited first question.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from playground.usage.prefix_digest import body_messages

INFERRED = "inferred:"


def session_inferred(*, key_id: int, end_user: str, body: Mapping[str, Any]) -> str:
    """The session of a request that names none, from its conversation's opening; "" for a body
    with no messages."""
    messages = body_messages(body)
    if not messages:
        return ""
    first_user = next(
        (
            i
            for i, message in enumerate(messages)
            if isinstance(message, dict) and message.get("role") == "user"
        ),
        0,
    )
    opening = json.dumps(
        [key_id, end_user, messages[: first_user + 1]],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return INFERRED + hashlib.blake2b(opening.encode(), digest_size=12).hexdigest()
