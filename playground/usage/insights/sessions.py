"""What a session is, for cache analysis: the requests that share one prompt prefix over time.

A session is a chat conversation, else the gateway's `x-playground-session` header, else the
`x-session-affinity` key: the most specific of the three a record carries. An API key's records
that name no session (no conversation, no header) get sessions inferred from their prompt
prefixes instead (`session_inference`), the affinity key being what such a client may drop or
change. Other records with none belong to no session and are never compared with each other.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from functools import reduce

from django.db.models import Case, CharField, F, Q, Value, When
from django.db.models.functions import Cast, Concat

CONVERSATION = "conversation:"
GATEWAY_SESSION = "session:"
AFFINITY = "affinity:"


def session_key(*, conversation_id: int | None, session: str, affinity_key: str) -> str:
    """The record's session ("conversation:12", "session:abc", "affinity:xyz"), or "" for none."""
    if conversation_id is not None:
        return f"{CONVERSATION}{conversation_id}"
    if session:
        return f"{GATEWAY_SESSION}{session}"
    if affinity_key:
        return f"{AFFINITY}{affinity_key}"
    return ""


def session_key_expression() -> Case:
    """`session_key` in SQL, to group and filter records by session in the database."""
    return Case(
        When(
            conversation_id__isnull=False,
            then=Concat(Value(CONVERSATION), Cast("conversation_id", CharField()), output_field=CharField()),
        ),
        When(~Q(session=""), then=Concat(Value(GATEWAY_SESSION), F("session"), output_field=CharField())),
        When(~Q(affinity_key=""), then=Concat(Value(AFFINITY), F("affinity_key"), output_field=CharField())),
        default=Value(""),
        output_field=CharField(),
    )


def session_filter(key: str) -> Q:
    """The records of session `key` (as `session_key` names it), by their indexed columns."""
    return sessions_filter([key])


def sessions_filter(keys: Iterable[str]) -> Q:
    """The records of any of the sessions `keys`, by their indexed columns (conversation, gateway
    session, affinity key): what `session_key` in `keys` selects without computing it per record."""
    conversations, sessions, affinities = [], [], []
    for key in keys:
        if key.startswith(CONVERSATION):
            conversations.append(int(key.removeprefix(CONVERSATION)))
        elif key.startswith(GATEWAY_SESSION):
            sessions.append(key.removeprefix(GATEWAY_SESSION))
        elif key.startswith(AFFINITY):
            affinities.append(key.removeprefix(AFFINITY))
        else:
            raise ValueError(f"not a session key: {key!r}")
    parts = []
    if conversations:
        parts.append(Q(conversation_id__in=conversations))
    if sessions:
        parts.append(Q(conversation_id__isnull=True, session__in=sessions))
    if affinities:
        parts.append(Q(conversation_id__isnull=True, session="", affinity_key__in=affinities))
    return reduce(operator.or_, parts) if parts else Q(pk__in=[])  # no key: no record


def expected_cached_tokens(*, previous_prompt_tokens: int, prompt_tokens: int) -> int:
    """What an intact prefix would bring back cached: the whole previous prompt, which the new
    one starts with (never more than the new prompt itself)."""
    return min(previous_prompt_tokens, prompt_tokens)
