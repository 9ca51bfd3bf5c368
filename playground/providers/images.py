"""Images on the wire: OpenAI `image_url` content parts with base64 data URLs.

Workers AI takes images only as data URLs (docs/reference/workers-ai-api.md §5: URL sources
are refused), and so does every OpenAI-compatible server we talk to. This module builds the parts, counts them
for the prompt estimate, and takes them out of a body that is kept (`redact_images`): a
request as stored shows each image's hash, type and size instead of megabytes of base64.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any

# What the prompt estimate counts for one image, in characters of text (the meter reads
# about 4 characters per token, so this is ~1,000 tokens). Providers do not say how they
# count images (docs/reference/workers-ai-api.md §5: "not confirmed"); 1,000 tokens is of the
# order that vision models charge for an image downscaled to 2,048 px, and a fixed figure keeps the base64
# (megabytes) out of the estimate.
IMAGE_PROMPT_CHARS = 4_000

_DATA_URL = re.compile(
    r"data:(?P<type>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[\w.+-]+=[\w.+-]+)*);base64,", re.ASCII
)


def image_part(*, content_type: str, data: bytes) -> dict[str, Any]:
    """One OpenAI content part carrying `data` as a base64 data URL."""
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{content_type};base64,{encoded}"}}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def content_prompt_chars(content: Any) -> int:
    """Characters a message's `content` adds to the prompt estimate.

    A string counts as itself. A list of parts counts its text parts, and each image part
    as `IMAGE_PROMPT_CHARS` whatever the size of its base64.
    """
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        total = 0
        for part in content:
            if not isinstance(part, dict):
                total += len(str(part))
            elif part.get("type") == "image_url":
                total += IMAGE_PROMPT_CHARS
            else:
                total += len(str(part.get("text") or ""))
        return total
    return len(str(content))


def redact_images(body: Any) -> Any:
    """`body` with every base64 data URL replaced by `{"sha256", "content_type", "bytes"}`.

    Walks dicts and lists (the body is not changed in place). `sha256` and `bytes` describe
    the decoded image, so they match the stored attachment; a data URL whose base64 does not
    decode keeps a hash of its text and `bytes: None`.
    """
    if isinstance(body, str):
        return _described(body) if body.startswith("data:") else body
    if isinstance(body, dict):
        return {key: redact_images(value) for key, value in body.items()}
    if isinstance(body, list | tuple):
        return [redact_images(value) for value in body]
    return body


def _described(text: str) -> str | dict[str, Any]:
    match = _DATA_URL.match(text)
    if match is None:
        return text
    payload = text[match.end() :]
    try:
        data: bytes | None = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        data = None
    digest = hashlib.sha256(data if data is not None else payload.encode("utf-8", "surrogatepass"))
    return {
        "sha256": digest.hexdigest(),
        "content_type": match.group("type") or "",
        "bytes": len(data) if data is not None else None,
    }
