"""A real OpenID provider on loopback for the single sign-on tests: the certified npm package
`oidc-provider` (tests/support/oidc_op/, installed by `make install` with `npm ci`), started per
test with the account that signs in and the faults its ID token should carry."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings

OP_DIR = Path(__file__).parent / "oidc_op"
CLIENT_ID = "playground"
CLIENT_SECRET = "test-client-secret-that-must-never-be-logged"
TEAM_CLAIM = "playground_team"


@dataclass(frozen=True)
class Provider:
    issuer: str


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the single sign-on tests run a real OpenID provider on Node")
    if not (OP_DIR / "node_modules" / "oidc-provider").is_dir():
        pytest.fail("oidc-provider is not installed: run `make install` (npm ci in tests/support/oidc_op)")
    return node


@contextmanager
def oidc_provider(
    redirect_uri: str,
    *,
    email: str = "ada@example.test",
    verified: bool = True,
    team: str | list[str] | None = None,
    audience: str = "",
    expired: bool = False,
    sub: str = "ada-sub",
) -> Iterator[Provider]:
    """The provider, signing in `email` (verified or not, with `team` in TEAM_CLAIM); `audience`
    and `expired` make its ID tokens name another client or carry a past expiry."""
    account: dict[str, Any] = {"sub": sub, "email": email, "email_verified": verified, "given_name": "Ada"}
    if team is not None:
        account[TEAM_CLAIM] = team
    options = {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "redirect_uri": redirect_uri,
        "account": account,
        "team_claim": TEAM_CLAIM,
        "id_token": {"audience": audience, "expired": expired},
    }
    process = subprocess.Popen(
        [node_or_skip(), "provider.mjs", json.dumps(options)],
        cwd=OP_DIR,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the OpenID provider did not start (exit {process.wait(5)})")
        yield Provider(issuer=json.loads(line)["issuer"])
    finally:
        process.terminate()
        process.wait(10)


def sso_configure(settings: LazySettings, issuer: str, **extra: Any) -> None:
    """Turn single sign-on on for one test, as the OIDC_* environment variables would."""
    settings.OIDC_ISSUER = issuer
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = "Acme ID"
    settings.OIDC_TEAM_CLAIM = TEAM_CLAIM
    for name, value in extra.items():
        setattr(settings, name, value)
