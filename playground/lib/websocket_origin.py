"""Sockets are opened only by our own pages: the Origin must be this site's exact origin.

Channels' `AllowedHostsOriginValidator` compares host names only, so a page on another
port of the same host (any local dev server on `localhost:<port>`) could open a socket
with the user's cookies. Here the Origin's scheme, host and port must equal those the
socket was opened on (its `Host` header, which must be in `ALLOWED_HOSTS`, and `wss`/`ws`
as `https`/`http`), or be listed in `CSRF_TRUSTED_ORIGINS` — the rule Django's CSRF check
applies to forms.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int | None]


class SameOriginValidator:
    """ASGI middleware: refuses a WebSocket whose Origin is not this site's own."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)


def origin_allowed(scope: dict[str, Any]) -> bool:
    headers = {name.lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}
    origin, host = headers.get(b"origin"), headers.get(b"host")
    if not origin or not host:
        return False
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    parsed = _origin(origin)
    if parsed is None:
        return False
    if parsed == _origin(f"{_page_scheme(scope, headers)}://{host}"):
        return True
    return any(parsed == _origin(trusted) for trusted in settings.CSRF_TRUSTED_ORIGINS)


def _page_scheme(scope: dict[str, Any], headers: dict[bytes, str]) -> str:
    """The scheme of the page that may open this socket: https for wss, or behind a TLS proxy."""
    if scope.get("scheme") == "wss":
        return "https"
    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_header:
        name, secure_value = proxy_header
        header = name.removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
        if headers.get(header, "").split(",")[0].strip() == secure_value:
            return "https"
    return "http"


def _origin(url: str) -> Origin | None:
    try:
        parts = urlsplit(url.strip().lower())
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port
