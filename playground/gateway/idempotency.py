"""`Idempotency-Key` on non-streamed requests, as the IETF draft describes it.

The first request with a key claims it (a row, unique per API key and idempotency key)
before anything is sent; its answer is stored when it ends. A repeat within
`IDEMPOTENCY_TTL` gets the stored answer, with no second upstream call and no second usage
record; the same key with another body gets 422; a repeat while the first is still running
gets 409. An answer that says to try again (429, 5xx) or that never came (the client went
away) is not kept, so the retry it invites is sent. Streamed requests are not replayable
(the stream is gone once relayed): the header is ignored on them, as docs/gateway.md says.

The stored answer is the whole body as sent, whatever the key's storage mode (issue 37), so it
is kept Fernet-encrypted (`providers.secrets`, the key of the provider tokens) and for the window
only: `idempotency_expire` deletes every row past it, its answer with it. Nothing of the text
outlives the window here, in any mode; the usage record keeps what its mode allows.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from dataclasses import dataclass

from cryptography.fernet import InvalidToken
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from playground.gateway.errors import GatewayError
from playground.gateway.models import IdempotencyState, IdempotentRequest
from playground.providers.secrets import data_decrypt, data_encrypt
from playground.usage.models import ApiKey

IDEMPOTENCY_TTL = dt.timedelta(hours=24)
KEY_MAX = 255
EXPIRE_BATCH = 1000

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Claim:
    id: int


@dataclass(frozen=True)
class Replay:
    status: int
    headers: dict[str, str]
    body: bytes


def body_digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def idempotency_claim(*, api_key: ApiKey, key: str, digest: str) -> Claim | Replay:
    """Claim `key` for this request, or the stored answer of the first one; `GatewayError` for 409/422."""
    if not key or len(key) > KEY_MAX:
        raise GatewayError(400, "invalid_header", f"Idempotency-Key must be 1 to {KEY_MAX} characters.")
    now = timezone.now()
    for _ in range(2):  # a second pass after clearing an expired or abandoned claim
        try:
            with transaction.atomic():
                row = IdempotentRequest.objects.create(
                    api_key=api_key, key=key, body_sha256=digest, created_at=now
                )
            return Claim(row.pk)
        except IntegrityError:
            pass
        existing = IdempotentRequest.objects.filter(api_key=api_key, key=key).first()
        if existing is None:
            continue
        if existing.created_at < now - IDEMPOTENCY_TTL or _abandoned(existing, now):
            IdempotentRequest.objects.filter(pk=existing.pk, created_at=existing.created_at).delete()
            continue
        if existing.body_sha256 != digest:
            raise GatewayError(
                422,
                "idempotency_key_reused",
                "This Idempotency-Key was used with a different body in the last 24 hours: use a new key "
                "for a new request.",
            )
        if existing.state == IdempotencyState.IN_FLIGHT:
            raise GatewayError(
                409,
                "idempotency_in_flight",
                "A request with this Idempotency-Key is still running: wait for its answer, then repeat "
                "the request to get it.",
            )
        try:
            body = data_decrypt(bytes(existing.body)) if existing.body else b""
        except InvalidToken:
            # FIELD_ENCRYPTION_KEY changed without FIELD_ENCRYPTION_KEY_PREVIOUS: the answer is lost,
            # so the key is given back and this request is sent as a first one.
            logger.warning("An idempotent answer could not be decrypted; its key is claimed again.")
            IdempotentRequest.objects.filter(pk=existing.pk).delete()
            continue
        return Replay(status=existing.status or 200, headers=dict(existing.headers), body=body)
    raise GatewayError(409, "idempotency_in_flight", "A request with this Idempotency-Key is being claimed.")


def idempotency_store(claim: Claim, *, status: int, headers: dict[str, str], body: bytes) -> None:
    """Keep the answer for repeats, or give the key back when the answer invites a retry."""
    if status == 429 or status >= 500:
        idempotency_release(claim)
        return
    IdempotentRequest.objects.filter(pk=claim.id).update(
        state=IdempotencyState.DONE, status=status, headers=headers, body=data_encrypt(body)
    )


def idempotency_release(claim: Claim) -> None:
    IdempotentRequest.objects.filter(pk=claim.id, state=IdempotencyState.IN_FLIGHT).delete()


def idempotency_expire(*, now: dt.datetime | None = None) -> int:
    """Delete every claim and answer older than the window, in batches; returns how many."""
    cutoff = (now or timezone.now()) - IDEMPOTENCY_TTL
    removed = 0
    expired = IdempotentRequest.objects.filter(created_at__lt=cutoff).values_list("pk", flat=True)
    while ids := list(expired[:EXPIRE_BATCH]):
        removed += IdempotentRequest.objects.filter(pk__in=ids).delete()[0]
    return removed


def _abandoned(row: IdempotentRequest, now: dt.datetime) -> bool:
    """A claim still in flight long after any request could have ended: its process died."""
    limit = dt.timedelta(seconds=settings.UPSTREAM_TOTAL_TIMEOUT * 2 + 60)
    return row.state == IdempotencyState.IN_FLIGHT and row.created_at < now - limit
