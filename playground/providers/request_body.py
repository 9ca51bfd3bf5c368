"""The request body as kept on a usage record: what was sent, minus what must not be stored.

`recorded_body` is applied by the adapter to the very body it posts (`payload`), so the
record shows the request as sent: every field, the parameters the connection's kind took,
`stream` as it went out. Two things are taken out:
- secrets: the connection's token is never put in a body, but a user could paste it (or
  another key) into a message, so every string is passed through `secrets.redact`;
- images: each data URL is replaced by its hash, type and size (an image is megabytes of
  base64, and the attachment itself is kept by the chat).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from playground.providers.images import redact_images
from playground.providers.secrets import redact


def recorded_body(body: dict[str, Any], *, secrets: Iterable[str] = ()) -> dict[str, Any]:
    # Images first: the secret patterns need not read megabytes of base64.
    result: dict[str, Any] = _walk(redact_images(body), [secret for secret in secrets if secret])
    return result


def _walk(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {key: _walk(item, secrets) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(item, secrets) for item in value]
    return value
