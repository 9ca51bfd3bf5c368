"""What a session is, for cache analysis: the requests that share one prompt prefix over time.

A session is a chat conversation, else the gateway's `x-playground-session` header, else the
`x-session-affinity` key: the most specific of the three a record carries. An API key's records
that name no session (no conversation, no header) get sessions inferred from their prompt
prefixes instead (`session_inference`), the affinity key being what such a client may drop or
change. Other records with none belong to no session and are never compared with each other.
"""

from __future__ import annotations

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
    if key.startswith(CONVERSATION):
        return Q(conversation_id=int(key.removeprefix(CONVERSATION)))
    if key.startswith(GATEWAY_SESSION):
        return Q(conversation_id__isnull=True, session=key.removeprefix(GATEWAY_SESSION))
    if key.startswith(AFFINITY):
        return Q(conversation_id__isnull=True, session="", affinity_key=key.removeprefix(AFFINITY))
    raise ValueError(f"not a session key: {key!r}")


def expected_cached_tokens(*, previous_prompt_tokens: int, prompt_tokens: int) -> int:
    """What an intact prefix would bring back cached: the whole previous prompt, which the new
    one starts with (never more than the new prompt itself)."""
    return min(previous_prompt_tokens, prompt_tokens)
