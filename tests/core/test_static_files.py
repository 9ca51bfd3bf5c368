"""Our own static files (no CDN) are served by the app, as the ASGI server wants them."""

from __future__ import annotations

from django.conf import settings
from django.http import StreamingHttpResponse
from django.test import AsyncClient

PLOTLY = "vendor/plotly-4.1.1.min.js"


async def test_a_static_file_streams_asynchronously() -> None:
    """Under ASGI Django reads a synchronous file stream whole, in a thread, before sending it
    (and warns): plotly.js is 4.6 MB. The static middleware must hand it over as async."""
    response = await AsyncClient().get(settings.STATIC_URL + PLOTLY)

    assert response.status_code == 200
    assert response["content-type"].startswith("text/javascript")
    assert isinstance(response, StreamingHttpResponse) and response.is_async
    body = b"".join([part async for part in response.streaming_content])
    assert body == (settings.BASE_DIR / "static" / PLOTLY).read_bytes()
