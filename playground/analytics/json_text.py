"""JSON text as a person reads it: characters as themselves, not as `\\u` escapes.

SQLite holds a JSON column as the text Python's `json.dumps` wrote, every non-ASCII character
escaped ("na\\u00efve"); PostgreSQL's jsonb writes them as they are. The exports pass on the
database's own text (its numbers as stored), so the escapes are undone here: a no-op on
PostgreSQL's text, which keeps both CSV paths byte for byte equal there.
"""

from __future__ import annotations

import re

# An escaped backslash (left as it is, so "\\\\u0041" stays text) or a \uXXXX escape, with the
# low half of a surrogate pair when one follows.
_ESCAPE = re.compile(r"\\(?:\\|u([0-9a-fA-F]{4})(?:\\u([dD][c-fC-F][0-9a-fA-F]{2}))?)")
_KEPT = {0x22, 0x5C}  # a quote and a backslash must stay escaped


def json_text_readable(text: str) -> str:
    """`text` (valid JSON) with each `\\uXXXX` escape of a printable character replaced by the
    character; control characters, quotes, backslashes and lone surrogates stay escaped."""
    return _ESCAPE.sub(_unescaped, text)


def _unescaped(match: re.Match[str]) -> str:
    escape, high, low = match.group(0), match.group(1), match.group(2)
    if high is None:  # an escaped backslash
        return escape
    code = int(high, 16)
    if low is not None and 0xD800 <= code < 0xDC00:
        return chr(0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00))
    rest = escape[6:]  # a low surrogate after a character that is no high one: left escaped
    if code < 0x20 or code in _KEPT or 0xD800 <= code < 0xE000:
        return escape[:6] + rest
    return chr(code) + rest
