"""Which salt a request's placeholders are made with (issue 37): one per conversation, so a
value reads the same in every turn of it.

A salt per record changed each value's placeholder from one turn to the next: with upstream
redaction on, the conversation's history went upstream different each time, and the provider's
cached prefix broke at its first redacted value. The salt is instead an HMAC of the server's
secret (`SECRET_KEY`), the team and the request's session as the cache analysis names it
(`insights.sessions.session_key`: the chat conversation, else the gateway's
`x-playground-session`, else its `x-session-affinity` key), else the record's `source` (a batch
item's attempt, a compare column's: reproducible when a queued item's result is recorded),
else a random one (a request of no session: per request). Two conversations, or two teams,
never share a salt; nobody without the secret can hash guesses to match a placeholder.
"""

from __future__ import annotations

from django.conf import settings
from django.utils.crypto import salted_hmac

from playground.lib.redaction import Redaction, new_salt
from playground.usage.calls.context import RequestContext
from playground.usage.insights.sessions import session_key

KEY_SALT = "playground.usage.redaction_salt"
SALT_BYTES = 16


def redaction_scope(context: RequestContext) -> str:
    """What the request's placeholders are stable across ("" : this request only)."""
    session = session_key(
        conversation_id=context.conversation_id,
        session=context.attribution.session,
        affinity_key=context.affinity_key,
    )
    return session or (f"source:{context.source}" if context.source else "")


def redaction_salt(context: RequestContext) -> bytes:
    scope = redaction_scope(context)
    if not scope:
        return new_salt()
    return salted_hmac(KEY_SALT, f"{context.team_id}\0{scope}", algorithm="sha256").digest()[:SALT_BYTES]


def context_redaction(context: RequestContext) -> Redaction:
    """A new redaction (counts at zero) with the request's salt."""
    return Redaction(phone_region=settings.REDACTION_PHONE_REGION, salt=redaction_salt(context))
