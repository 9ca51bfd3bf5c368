"""Small helpers shared by the engine tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from tests.support.engine import EngineProcess


def sse_payloads(lines: Iterator[str]) -> list[Any]:
    """The decoded `data:` payloads of an event stream (`[DONE]` kept as the string)."""
    payloads: list[Any] = []
    for line in lines:
        if line.startswith("data: "):
            data = line.removeprefix("data: ")
            payloads.append(data if data == "[DONE]" else json.loads(data))
    return payloads


def still_serves(engine: EngineProcess) -> bool:
    response = httpx.post(
        engine.run_url(),
        headers=engine.headers,
        json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1},
        timeout=60,
    )
    return response.status_code == 200 and response.json()["success"] is True
