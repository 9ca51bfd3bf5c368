"""WebSocket routes, mounted by `playground.asgi` under the session auth stack."""

from __future__ import annotations

from django.urls import URLPattern, path

from playground.chat.compare.socket import CompareConsumer
from playground.chat.sockets.chat import ChatConsumer

SOCKET_PREFIX = "ws/chat/"
COMPARE_PREFIX = f"{SOCKET_PREFIX}compare/"

websocket_urlpatterns: list[URLPattern] = [
    path(f"{SOCKET_PREFIX}<int:conversation_id>/", ChatConsumer.as_asgi(), name="chat-socket"),
    path(f"{COMPARE_PREFIX}<int:comparison_id>/", CompareConsumer.as_asgi(), name="compare-socket"),
]


def chat_socket_path(conversation_id: int) -> str:
    """The path a page connects to (WebSocket routes are not in the HTTP URLconf)."""
    return f"/{SOCKET_PREFIX}{conversation_id}/"


def compare_socket_path(comparison_id: int) -> str:
    return f"/{COMPARE_PREFIX}{comparison_id}/"
