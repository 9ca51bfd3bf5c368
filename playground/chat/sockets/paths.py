"""Where the sockets listen: `chat/routing.py` mounts them here, and the pages connect here
(WebSocket routes are not in the HTTP URLconf, so a page cannot `reverse()` them)."""

from __future__ import annotations

SOCKET_PREFIX = "ws/chat/"
COMPARE_PREFIX = f"{SOCKET_PREFIX}compare/"


def chat_socket_path(conversation_id: int) -> str:
    return f"/{SOCKET_PREFIX}{conversation_id}/"


def compare_socket_path(comparison_id: int) -> str:
    return f"/{COMPARE_PREFIX}{comparison_id}/"
