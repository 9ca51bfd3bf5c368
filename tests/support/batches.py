"""Batch input for tests: models on either path, and JSONL rows of prompts."""

from __future__ import annotations

import json
from typing import Any

QUEUE_MODEL = "@cf/openai/gpt-oss-20b"  # the catalogue says it takes the batch queue
NO_QUEUE_MODEL = "@cf/qwen/qwen3-30b-a3b-fp8"  # ... and this one does not


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(row) for row in rows) + "\n"


def prompts(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"messages": [{"role": "user", "content": f"Question {i}"}], **extra} for i in range(n)]
