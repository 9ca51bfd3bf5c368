"""The provider's endpoints, read from `<issuer>/.well-known/openid-configuration` on the first
sign-in (not at start-up: a provider that is down then must not stop the app) and kept an hour."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import httpx
from django.conf import settings

logger = logging.getLogger(__name__)

DISCOVERY_SECONDS = 3600.0
PROVIDER_DOWN = "The sign-in provider did not answer. Try again in a few minutes, or log in with a password."


class SsoRefused(Exception):
    """A sign-in refused for a reason the person can read; `status` is the page's HTTP status."""

    def __init__(self, message: str, *, status: int = 403) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Endpoints:
    issuer: str
    authorization: str
    token: str
    userinfo: str
    jwks: str


_found: dict[str, tuple[float, Endpoints]] = {}


def sso_enabled() -> bool:
    return bool(settings.OIDC_ISSUER and settings.OIDC_RP_CLIENT_ID)


def endpoints() -> Endpoints:
    """The configured issuer's endpoints; `SsoRefused` (502) when its discovery document cannot be read."""
    issuer: str = settings.OIDC_ISSUER
    cached = _found.get(issuer)
    if cached is not None and time.monotonic() - cached[0] < DISCOVERY_SECONDS:
        return cached[1]
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = httpx.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
        found = Endpoints(
            issuer=str(document["issuer"]),
            authorization=str(document["authorization_endpoint"]),
            token=str(document["token_endpoint"]),
            userinfo=str(document["userinfo_endpoint"]),
            jwks=str(document["jwks_uri"]),
        )
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        logger.warning("OpenID Connect discovery at %s failed: %s", url, type(exc).__name__)
        raise SsoRefused(PROVIDER_DOWN, status=502) from exc
    if found.issuer.rstrip("/") != issuer:
        # OpenID Connect Discovery 1.0, 4.3: the document must name the issuer it was fetched for.
        logger.warning("OpenID Connect discovery at %s names another issuer: %s", url, found.issuer)
        raise SsoRefused("The sign-in provider is misconfigured (its issuer does not match).", status=502)
    _found[issuer] = (time.monotonic(), found)
    return found
