"""Compare fixtures: a socket on a comparison, as a signed-in actor (or a visitor: None)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings

from tests.support.sockets import Socket

OpenCompare = Callable[[str | None, int], Socket]
RUN_END = 'id="compare-rerun"'  # the actions are idle again: every column has ended


@pytest.fixture
def open_compare(session_cookies: dict[str, str]) -> OpenCompare:
    from playground.asgi import application

    def make(actor: str | None, comparison_id: int) -> Socket:
        headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
        if actor is not None:
            cookie = f"{settings.SESSION_COOKIE_NAME}={session_cookies[actor]}"
            headers.append((b"cookie", cookie.encode()))
        path = f"/ws/chat/compare/{comparison_id}/"
        return Socket(communicator=WebsocketCommunicator(application, path, headers=headers), frames=[])

    return make
