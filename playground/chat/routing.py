"""WebSocket routes, mounted by `playground.asgi` under the session auth stack."""

from __future__ import annotations

from django.urls import URLPattern, path

from playground.chat.compare.socket import CompareConsumer
from playground.chat.sockets.chat import ChatConsumer
from playground.chat.sockets.paths import COMPARE_PREFIX, SOCKET_PREFIX

websocket_urlpatterns: list[URLPattern] = [
    path(f"{SOCKET_PREFIX}<int:conversation_id>/", ChatConsumer.as_asgi(), name="chat-socket"),
    path(f"{COMPARE_PREFIX}<int:comparison_id>/", CompareConsumer.as_asgi(), name="compare-socket"),
]
