"""The authentication backend of the sign-in callback: mozilla-django-oidc's code flow, with what
it leaves out made strict (the ID token's audience and issuer, a readable refusal for each fault)
and the playground's rules (verified e-mail only, team claim, passwords off)."""

from __future__ import annotations

import logging
import re
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from playground.teams.services.sso import sso_teams_join
from playground.teams.sso.discovery import PROVIDER_DOWN, SsoRefused, endpoints, sso_enabled

logger = logging.getLogger(__name__)

UNVERIFIED = (
    "Your sign-in provider has not verified your e-mail address, so it cannot be matched to an account. "
    "Verify the address with your provider, then sign in again."
)
NO_EMAIL = "Your sign-in provider did not share an e-mail address, which is how your account is found here."
BAD_TOKEN = "The sign-in could not be verified (the provider's ID token did not check out). Start again."  # noqa: S105
EXPIRED = "The sign-in had expired before it reached the playground. Start again."
WRONG_AUDIENCE = "The provider's ID token was issued for another application, so it was refused."
CODE_REFUSED = "The sign-in provider refused this sign-in code (it may have been used already). Start again."


class SsoBackend(OIDCAuthenticationBackend):  # type: ignore[misc]  # the library ships no types
    # Its properties below keep the names the library reads (OIDC_OP_*_ENDPOINT).
    def __init__(self) -> None:
        # Not the library's __init__: it reads the endpoints, and this backend is built for every
        # request of a signed-in session. They are discovered on the first sign-in instead.
        self.UserModel = get_user_model()
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return endpoints().token

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str:
        return endpoints().userinfo

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:
        return endpoints().jwks

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        """Only the callback's call (it passes the nonce); every fault becomes `SsoRefused`."""
        if request is None or "nonce" not in kwargs or not sso_enabled():
            return None
        try:
            user: User | None = super().authenticate(request, **kwargs)
        except requests.HTTPError as exc:
            status = exc.response.status_code if exc.response is not None else 0
            logger.warning("Single sign-on: the provider answered %s", status)
            if 400 <= status < 500:
                raise SsoRefused(CODE_REFUSED, status=400) from exc
            raise SsoRefused(PROVIDER_DOWN, status=502) from exc
        except requests.RequestException as exc:
            logger.warning("Single sign-on: the provider could not be reached: %s", type(exc).__name__)
            raise SsoRefused(PROVIDER_DOWN, status=502) from exc
        except (jwt.InvalidTokenError, SuspiciousOperation) as exc:
            logger.warning("Single sign-on: the ID token was refused: %s", exc)
            raise SsoRefused(BAD_TOKEN) from exc
        return user

    def _verify_jws(self, payload: str | bytes, key: Any) -> dict[str, Any]:
        """The library skips the audience; here the signature, audience, issuer and expiry must all hold."""
        algorithm = jwt.get_unverified_header(payload).get("alg")
        if algorithm != self.OIDC_RP_SIGN_ALGO:
            raise SsoRefused(BAD_TOKEN)
        try:
            claims: dict[str, Any] = jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=endpoints().issuer,
                leeway=settings.OIDC_CLOCK_SKEW_SECONDS,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise SsoRefused(EXPIRED) from exc
        except jwt.InvalidAudienceError as exc:
            logger.warning("Single sign-on: an ID token for another audience was refused")
            raise SsoRefused(WRONG_AUDIENCE) from exc
        return claims

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        claims: dict[str, Any] = super().get_userinfo(access_token, id_token, payload)
        if claims.get("sub") != payload.get("sub"):  # OpenID Connect Core 1.0, 5.3.2
            raise SsoRefused(BAD_TOKEN)
        return claims

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        if not claims.get("email"):
            raise SsoRefused(NO_EMAIL)
        if claims.get("email_verified") is not True:
            raise SsoRefused(UNVERIFIED)
        return True

    def create_user(self, claims: dict[str, Any]) -> User:
        # No password: the account signs in through the provider (an admin may give it one
        # unless OIDC_DISABLE_PASSWORDS is set).
        user: User = self.UserModel.objects.create_user(
            _free_username(claims), email=claims["email"], first_name=str(claims.get("given_name", ""))[:150]
        )
        return self.update_user(user, claims)

    def update_user(self, user: User, claims: dict[str, Any]) -> User:
        if settings.OIDC_DISABLE_PASSWORDS and user.has_usable_password():
            user.set_unusable_password()
            user.save(update_fields=["password"])
        if settings.OIDC_TEAM_CLAIM and settings.OIDC_TEAM_CLAIM in claims:
            sso_teams_join(user=user, claim=claims[settings.OIDC_TEAM_CLAIM])
        return user


def _free_username(claims: dict[str, Any]) -> str:
    """The provider's preferred username, else the e-mail's local part, made unique ("ada", "ada-2")."""
    wanted = str(claims.get("preferred_username") or str(claims["email"]).split("@")[0])
    base = re.sub(r"[^\w.@+-]", "-", wanted)[:140] or "user"
    name, suffix = base, 1
    while User.objects.filter(username__iexact=name).exists():
        suffix += 1
        name = f"{base}-{suffix}"
    return name
