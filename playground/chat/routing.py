"""WebSocket routes, mounted by `playground.asgi` under the session auth stack."""

from __future__ import annotations

from django.urls import URLPattern, path

from playground.chat.consumers import ChatConsumer

SOCKET_PREFIX = "ws/chat/"

websocket_urlpatterns: list[URLPattern] = [
    path(f"{SOCKET_PREFIX}<int:conversation_id>/", ChatConsumer.as_asgi(), name="chat-socket"),
]


def chat_socket_path(conversation_id: int) -> str:
    """The path a page connects to (WebSocket routes are not in the HTTP URLconf)."""
    return f"/{SOCKET_PREFIX}{conversation_id}/"
