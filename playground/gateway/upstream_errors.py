"""A metered call that ended before any byte of an answer: the error the client gets, in its API's shape."""

from __future__ import annotations

from playground.gateway.errors import GatewayError
from playground.providers.events import UpstreamError
from playground.usage.budgets import BUDGET_EXCEEDED, UNPRICED_REFUSED
from playground.usage.calls.call import MeteredCall

REFUSAL_STATUS = {BUDGET_EXCEEDED: 402, UNPRICED_REFUSED: 402}


def error_for_failed_call(call: MeteredCall, error: UpstreamError | None) -> GatewayError:
    """The refusal (budget: 402, a status the SDKs do not retry; unreadable budget: 503), or the
    upstream's failure with its own status (429 and 5xx with `Retry-After` when it sent one; a
    timeout 504; no answer at all 502)."""
    if call.refusal:
        return GatewayError(REFUSAL_STATUS.get(call.refusal_code, 503), call.refusal_code, call.refusal)
    if error is None:
        return GatewayError(502, "upstream_error", "The upstream ended without an answer.")
    status = error.http_status or (504 if error.is_timeout else 502)
    if status in (401, 403):  # the connection's own token was refused: not the caller's key
        return GatewayError(
            502,
            "upstream_auth",
            f"The upstream refused the key's connection ({status}): a team admin "
            f"should check the connection's token. Upstream: {error.message}",
        )
    headers = {"retry-after": str(max(1, round(error.retry_after)))} if error.retry_after is not None else {}
    code = error.code or ("timeout" if error.is_timeout else "upstream_error")
    return GatewayError(status, code, f"Upstream: {error.message}", headers=headers)
