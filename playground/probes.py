"""`/healthz`, `/readyz` and `/metrics`: a plain ASGI app that `playground.asgi` serves beside Django.

Not Django views, for the reasons the gateway is not: a probe needs no session, login, CSRF, CSP
or host check (Prometheus and orchestrators call by IP address, which `ALLOWED_HOSTS` would
refuse), and must answer in milliseconds. Nothing here logs a request (uvicorn's access log is off
in the Procfile), so probes every few seconds add no noise.

- `/healthz`: the process is alive (no dependency is asked), always open.
- `/readyz`: the dependencies' checks (`playground.readiness`): 200 when all pass, 503 with each
  failing one's reason.
- `/metrics`: the Prometheus text (`lib.metrics`), with the team budgets and the batch queue
  computed at scrape time.

With `METRICS_TOKEN` set, `/readyz` and `/metrics` answer only `Authorization: Bearer <token>`.
Without it, `/metrics` answers only a client on a loopback address whose request carries no
proxy header (a reverse proxy on the same host connects from loopback too, and adds one), so a
deployment never publishes its metrics by default; `/readyz` stays open for orchestrators.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings

from playground.batches.metrics import BatchQueueCollector
from playground.lib.db import connections_heal, db_run
from playground.lib.metrics import CONTENT_TYPE, metrics_exposition
from playground.readiness import readiness_checks
from playground.usage.metrics import BudgetCollector

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
PROXY_HEADERS = frozenset({b"forwarded", b"x-forwarded-for", b"x-real-ip"})


def is_probe_path(path: str) -> bool:
    return path in PATHS


async def probes_app(scope: Scope, receive: Receive, send: Send) -> None:
    path: str = scope["path"]
    if scope["method"] not in ("GET", "HEAD"):
        await _send(send, 405, b"Use GET.\n", headers=[(b"allow", b"GET, HEAD")])
    elif path == "/healthz":
        await _send(send, 200, b"ok\n")
    elif (refusal := _refusal(scope)) is not None:
        await _send(send, *refusal)
    elif path == "/readyz":
        checks = await readiness_checks()
        ready = all(check.ok for check in checks)
        body = {
            "status": "ready" if ready else "unavailable",
            "checks": {
                check.name: {
                    "ok": check.ok,
                    "ms": check.ms,
                    **({"reason": check.reason} if check.reason else {}),
                }
                for check in checks
            },
        }
        await _send(send, 200 if ready else 503, json.dumps(body).encode(), content_type=b"application/json")
    else:
        await _send(send, 200, await db_run(_exposition), content_type=CONTENT_TYPE.encode())


def _exposition() -> bytes:
    connections_heal()
    return metrics_exposition([BudgetCollector(), BatchQueueCollector()])


def _refusal(scope: Scope) -> tuple[int, bytes, list[tuple[bytes, bytes]]] | None:
    """Why `/readyz` or `/metrics` is refused to this request (status, body, headers), or None."""
    headers = dict(scope["headers"])
    token: str = settings.METRICS_TOKEN
    if token:
        scheme, _, offered = headers.get(b"authorization", b"").partition(b" ")
        # Both sides hashed first: a constant-time comparison whatever the lengths.
        expected = hashlib.sha256(token.encode()).digest()
        if scheme.lower() == b"bearer" and hmac.compare_digest(
            hashlib.sha256(offered.strip()).digest(), expected
        ):
            return None
        return 401, b"Send Authorization: Bearer <METRICS_TOKEN>.\n", [(b"www-authenticate", b"Bearer")]
    if scope["path"] == "/readyz" or (_from_loopback(scope) and not PROXY_HEADERS & headers.keys()):
        return None
    return 403, b"Metrics answer only on loopback unless METRICS_TOKEN is set (docs/operations.md).\n", []


def _from_loopback(scope: Scope) -> bool:
    client = scope.get("client")
    if not client:
        return False
    try:
        return ipaddress.ip_address(client[0]).is_loopback
    except ValueError:  # a Unix socket's client, or a name
        return False


async def _send(
    send: Send,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    content_type: bytes = b"text/plain; charset=utf-8",
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
