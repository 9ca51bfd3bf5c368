"""Upstream redaction (issue 37): a team that turns it on sends the model typed placeholders
(`<email:3f9a>`) instead of the sensitive values its requests hold.

It happens in one place, for every path that sends (chat turns and tool continuations, compare
columns, batch items, gateway requests): the step that holds a call's budget before it is sent
(`calls.budget.calls_hold_together`, blocking, in a worker thread). The adapter redacts what the
model reads (`providers.upstream_redaction`; for the gateway, the client's own body it relays),
and the call keeps that `Redaction` in its context: the record writer redacts what the record
keeps with it (`usage.storage`), so the record's placeholders are the ones the model saw. The
salt is the conversation's (`usage.redaction_salt`): a value reads the same in every turn, so
the history sent again is byte for byte what the provider cached. The record's body is the
body as sent, so its prompt digests are of what the provider read. A redactor that fails sends
nothing: the call is refused, and its record keeps metadata only, the failure counted
(`storage.REDACTOR_ERROR`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from playground.accounts.models import StoreMode, Team
from playground.usage.redaction_salt import context_redaction
from playground.usage.storage import REDACTOR_ERROR

if TYPE_CHECKING:
    from playground.usage.calls.call import MeteredCall

logger = logging.getLogger(__name__)

NOT_SENT = (
    "Not sent: the team sends requests with sensitive values replaced, and the redactor failed on "
    "this one, so it was not sent as written either."
)


def calls_redact_upstream(calls: Sequence[MeteredCall]) -> list[MeteredCall]:
    """Redact the requests of `calls` whose team turned upstream redaction on (one query for the
    teams not known yet); returns the calls whose redaction failed, which must not be sent."""
    unknown = {call.context.team_id for call in calls if call.context.upstream_redaction is None}
    teams = (
        dict(Team.objects.filter(pk__in=unknown).values_list("pk", "upstream_redaction")) if unknown else {}
    )
    failed = []
    for call in calls:
        on = call.context.upstream_redaction
        if on is None:
            on = teams.get(call.context.team_id, False)
        if on and call.context.redaction is None and not _redacted(call):
            failed.append(call)
    return failed


def _redacted(call: MeteredCall) -> bool:
    redaction = context_redaction(call.context)
    try:
        request = call.adapter.upstream_redacted(call.request, redaction.text)
        body = call.adapter.body_as_sent(request)
    except Exception as exc:  # nothing is sent; its message may quote the text: only its type is logged
        logger.error("the redactor failed (%s): the request is not sent", type(exc).__name__)
        failed = context_redaction(call.context)
        failed.counts[REDACTOR_ERROR] += 1
        call.context = replace(
            call.context, store=StoreMode.METADATA, redaction=failed, upstream_redaction=True
        )
        return False
    call.request = request
    call.context = replace(call.context, request_body=body, redaction=redaction, upstream_redaction=True)
    return True
