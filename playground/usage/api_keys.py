"""Team API keys' secrets: made once, stored as a hash, found by the hash (`models.ApiKey`)."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from playground.usage.models import KEY_PREFIX, ApiKey
from playground.usage.statements.api_keys import api_keys_with_digests

PREFIX_SHOWN = 10  # "pgk_" and six characters of the secret: enough to tell a team's keys apart
# `last_used_at` is written at most this often per key: a write on every request would cost
# the gateway a second statement per call for a figure shown to the minute.
LAST_USED_EVERY = dt.timedelta(seconds=60)


@dataclass(frozen=True)
class NewSecret:
    secret: str  # shown once, never stored
    prefix: str
    sha256: str


def secret_new() -> NewSecret:
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    return NewSecret(secret=secret, prefix=secret[:PREFIX_SHOWN], sha256=secret_digest(secret))


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def api_key_issue(
    *,
    team_id: int,
    name: str,
    connection_id: int | None,
    created_by_id: int | None,
    **limits: Any,
) -> tuple[ApiKey, str]:
    """A new key and its secret (returned once, never stored). `limits`: the optional fields
    (`allowed_models`, `monthly_budget_usd`, `requests_per_minute`, `tokens_per_minute`,
    `expires_at`). Permission checks and the audit log are the caller's (`teams.services`)."""
    new = secret_new()
    key = ApiKey.objects.create(
        team_id=team_id,
        name=name,
        connection_id=connection_id,
        created_by_id=created_by_id,
        prefix=new.prefix,
        secret_sha256=new.sha256,
        **limits,
    )
    return key, new.secret


def api_key_for_secret(secret: str) -> ApiKey | None:
    """The key with this secret, its team and connection loaded (revoked and expired ones too:
    the caller says why they are refused); None when no key has it."""
    return api_keys_for_secrets([secret]).get(secret)


def api_keys_for_secrets(secrets: Collection[str]) -> dict[str, ApiKey]:
    """`api_key_for_secret` for several secrets in one statement (the gateway admits the
    requests that arrive together at once): each secret some key has, with its key.

    Every gateway request runs it: one hand-written statement (`statements.api_keys`, issue 24)."""
    if not secrets:
        return {}
    by_digest = {secret_digest(secret): secret for secret in secrets}
    return {by_digest[key.secret_sha256]: key for key in api_keys_with_digests(list(by_digest))}


def api_key_touch(key: ApiKey, *, now: dt.datetime | None = None) -> None:
    """Note that the key was used, at most once per `LAST_USED_EVERY` (one conditional UPDATE)."""
    now = now or timezone.now()
    if key.last_used_at is not None and now - key.last_used_at < LAST_USED_EVERY:
        return
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    key.last_used_at = now
