"""Images on the wire: data-URL parts, the prompt estimate, and their redaction from kept bodies."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from playground.providers.adapters import ChatRequest
from playground.providers.images import IMAGE_PROMPT_CHARS, image_part, redact_images, text_part

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
JPEG_BYTES = b"\xff\xd8\xff\xe0" + b"jpeg" * 3000


def body_with_two_images() -> dict:
    return {
        "model": "@cf/meta/llama-4-scout-17b-16e-instruct",
        "stream": True,
        "messages": [
            {"role": "system", "content": "Describe images."},
            {
                "role": "user",
                "content": [
                    text_part("What differs?"),
                    image_part(content_type="image/png", data=PNG_BYTES),
                    image_part(content_type="image/jpeg", data=JPEG_BYTES),
                ],
            },
        ],
    }


def test_each_data_url_is_replaced_by_its_hash_type_and_size() -> None:
    body = body_with_two_images()
    before = copy.deepcopy(body)

    redacted = redact_images(body)

    parts = redacted["messages"][1]["content"]
    assert parts[0] == {"type": "text", "text": "What differs?"}
    assert parts[1] == {
        "type": "image_url",
        "image_url": {
            "url": {
                "sha256": hashlib.sha256(PNG_BYTES).hexdigest(),
                "content_type": "image/png",
                "bytes": len(PNG_BYTES),
            }
        },
    }
    assert parts[2]["image_url"]["url"] == {
        "sha256": hashlib.sha256(JPEG_BYTES).hexdigest(),
        "content_type": "image/jpeg",
        "bytes": len(JPEG_BYTES),
    }
    assert "base64" not in json.dumps(redacted)
    assert redacted["messages"][0] == before["messages"][0] and redacted["model"] == before["model"]
    assert body == before  # the body that is sent is not changed


def test_text_that_merely_starts_with_data_is_left_alone() -> None:
    body = {"messages": [{"role": "user", "content": "data: a line from a CSV file"}]}

    assert redact_images(body) == body


def test_a_data_url_whose_base64_is_broken_is_still_taken_out() -> None:
    redacted = redact_images({"url": "data:image/png;base64,@@not base64@@"})

    assert redacted["url"]["bytes"] is None
    assert redacted["url"]["content_type"] == "image/png"
    assert len(redacted["url"]["sha256"]) == 64


def test_the_prompt_estimate_counts_text_parts_and_a_fixed_figure_per_image_never_base64() -> None:
    request = ChatRequest(model="m", messages=body_with_two_images()["messages"])

    assert request.prompt_chars == len("Describe images.") + len("What differs?") + 2 * IMAGE_PROMPT_CHARS


def test_the_prompt_estimate_of_plain_text_and_tool_call_messages_is_unchanged() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
        {"role": "tool", "tool_call_id": "1", "content": "42"},
    ]

    assert ChatRequest(model="m", messages=messages).prompt_chars == len("hello") + len("42")
