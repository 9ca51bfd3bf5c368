"""What the gateway keeps of an end user, for `usage.erasure` (issue 37): the answers its
idempotency store keeps for replay. An answer of an erased record (found by the request id its
headers carry), or one that holds the id once decrypted, is deleted: a repeat of that request
within the window is then sent again instead of replayed, which costs a request but keeps
nothing."""

from __future__ import annotations

from cryptography.fernet import InvalidToken

from playground.gateway.models import IdempotentRequest
from playground.providers.secrets import data_decrypt
from playground.usage.erasure import Erasure

REQUEST_ID_HEADER = "x-playground-request-id"


class GatewayEraser:
    tables = (IdempotentRequest,)

    def erase(self, run: Erasure) -> dict[str, int]:
        stored = IdempotentRequest.objects.filter(api_key__team_id=run.team_id).only("headers", "body")
        found = [row.pk for row in stored.iterator() if _holds(row, run)]
        if found and not run.dry_run:
            IdempotentRequest.objects.filter(pk__in=found).delete()
        return {"idempotent_answers": len(found)}


def _holds(row: IdempotentRequest, run: Erasure) -> bool:
    if str(row.headers.get(REQUEST_ID_HEADER, "")) in run.request_ids:
        return True
    return run.needle.found_in(_answer(row).decode("utf-8", "replace"))


def _answer(row: IdempotentRequest) -> bytes:
    """The kept answer in clear (`gateway.idempotency` keeps it encrypted); one no key opens is
    unreadable to a replay too, and holds nothing to find."""
    try:
        return data_decrypt(bytes(row.body)) if row.body else b""
    except InvalidToken:
        return b""
