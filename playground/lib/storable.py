"""Text and JSON that every database we run on can store.

A Python string can hold what UTF-8 cannot encode: a lone surrogate, which `json.loads`
makes from an escape such as "\\ud800". SQLite and PostgreSQL then refuse the whole row,
and PostgreSQL also refuses NUL in text and jsonb, and NaN or Infinity in jsonb. Upstream
data is cleaned once, where it is decoded; what a user typed is refused instead (see
`is_storable`), so that they know what was sent.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

REPLACEMENT_CHARACTER = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def is_storable(text: str) -> bool:
    return _UNSTORABLE.search(text) is None


def storable_text(text: str) -> str:
    """`text` with every NUL and lone surrogate replaced by U+FFFD."""
    return _UNSTORABLE.sub(REPLACEMENT_CHARACTER, text)


def storable_json(value: Any) -> Any:
    """Decoded JSON made storable: text cleaned, NaN and ±Infinity kept as their JSON names."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {storable_text(str(key)): storable_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable_json(item) for item in value]
    return value
