"""What the gateway keeps of an end user, for `usage.erasure` (issue 37): the answers its
idempotency store keeps for replay. An answer of an erased record (found by the request id its
headers carry), or one whose bytes hold the id, is deleted: a repeat of that request within the
window is then sent again instead of replayed, which costs a request but keeps nothing."""

from __future__ import annotations

from playground.gateway.models import IdempotentRequest
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
    return run.needle.found_in(bytes(row.body or b"").decode("utf-8", "replace"))
