"""Text and JSON that every database we run on can store.

A Python string can hold what UTF-8 cannot encode: a lone surrogate, which `json.loads`
makes from an escape such as "\\ud800". SQLite and PostgreSQL then refuse the whole row,
and PostgreSQL also refuses NUL in text and jsonb, and NaN or Infinity in jsonb. Upstream
data is cleaned once, where it is decoded; what a user typed is refused instead (see
`is_storable`), so that they know what was sent.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

REPLACEMENT_CHARACTER = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# What in JSON text can decode to an unstorable string: the characters themselves, or an
# escape of NUL or of a surrogate (which may be a lone one). A match only means "look closer".
_MAY_DECODE_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]|\\u(?:0000|[dD][89abcdefABCDEF])")


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


def storable_json_loads(raw: str | bytes) -> Any:
    """`storable_json(json.loads(raw))`, without walking a value whose strings need no cleaning.

    Every upstream frame is decoded with this, and walking each one cost more than decoding
    it (a profile of 200 relayed streams). Text holding no NUL, surrogate or escape of one
    decodes to clean strings; its numbers are made storable as they are parsed. Raises
    `ValueError` for what is not JSON, as `json.loads` does.
    """
    if isinstance(raw, bytes) or _MAY_DECODE_UNSTORABLE.search(raw):
        return storable_json(json.loads(raw))
    return _CLEAN_TEXT_DECODER.decode(raw)


def _storable_float(text: str) -> float | str:
    """A JSON number as `storable_json` leaves it (one too large for a float becomes ±Infinity)."""
    value: float | str = storable_json(float(text))
    return value


# NaN and ±Infinity kept as their names, as `storable_json` leaves them (made once: `json.loads`
# with hooks builds a decoder per call).
_CLEAN_TEXT_DECODER = json.JSONDecoder(parse_constant=str, parse_float=_storable_float)
