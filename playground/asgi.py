"""ASGI entry point: Django for HTTP, the gateway's API and the probes beside it, Channels for WebSockets."""

from __future__ import annotations

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from playground.chat.routing import websocket_urlpatterns  # noqa: E402
from playground.gateway.app import gateway_app  # noqa: E402
from playground.gateway.routes import is_gateway_path  # noqa: E402
from playground.lib.websocket_origin import SameOriginValidator  # noqa: E402
from playground.probes import is_probe_path, probes_app  # noqa: E402


async def http_app(scope: Any, receive: Any, send: Any) -> None:
    """`/v1/` and `/client/v4/` are the gateway's API (`playground.gateway.app`), `/healthz`, `/readyz`
    and `/metrics` the probes (`playground.probes`); the rest is Django."""
    if is_gateway_path(scope["path"]):
        await gateway_app(scope, receive, send)
    elif is_probe_path(scope["path"]):
        await probes_app(scope, receive, send)
    else:
        await django_asgi_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
