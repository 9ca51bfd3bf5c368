"""The changed section of two request bodies, as a unified diff, to show beside a cache break.

Redacted bodies (issue 37) are compared with their placeholders' salts left out: each record
has its own salt, so the same e-mail address reads `<email:3f9a>` in one and `<email:81c0>` in
the next, and would otherwise look changed in every message that holds one.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from playground.lib.redaction import PLACEHOLDER
from playground.usage.insights.cache_breaks import Cause
from playground.usage.prefix_digest import body_messages, split_system

MAX_LINES = 80
# The causes that name a section of the prompt, which a diff of two bodies shows.
SECTION_CAUSES = frozenset(
    {
        Cause.TOOLS_CHANGED,
        Cause.SYSTEM_CHANGED,
        Cause.HISTORY_CHANGED,
        Cause.MODEL_CHANGED,
        Cause.ROUTE_CHANGED,
        Cause.FORMAT_CHANGED,
    }
)


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "+" added, "-" removed, " " context, "@" a hunk header
    text: str


def section_diff(
    cause: Cause, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, *, redacted: bool = False
) -> list[DiffLine]:
    """The lines of the section `cause` names, previous request first; [] when the cause is
    not a section (affinity, eviction) or a body was not kept. `redacted`: either body is."""
    if before is None or after is None:
        return []
    if redacted:
        before, after = _unsalted(before), _unsalted(after)
    if cause == Cause.TOOLS_CHANGED:
        return _diff(before.get("tools") or [], after.get("tools") or [])
    if cause == Cause.SYSTEM_CHANGED:
        return _diff(_system(before), _system(after))
    if cause == Cause.HISTORY_CHANGED:
        return _history_diff(_history(before), _history(after))
    if cause in (Cause.MODEL_CHANGED, Cause.ROUTE_CHANGED):
        return _diff(before.get("model", ""), after.get("model", ""))
    if cause == Cause.FORMAT_CHANGED:
        return _diff(before.get("response_format") or {}, after.get("response_format") or {})
    return []


def _unsalted(value: Any) -> Any:
    """`value` with every placeholder's salted digits left out (`<email:3f9a>` reads `<email>`)."""
    if isinstance(value, str):
        return PLACEHOLDER.sub(r"<\1>", value)
    if isinstance(value, list):
        return [_unsalted(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _unsalted(item) for key, item in value.items()}
    return value


def _system(body: Mapping[str, Any]) -> list[Any]:
    return split_system(body_messages(body) or [])[0]


def _history(body: Mapping[str, Any]) -> list[Any]:
    return split_system(body_messages(body) or [])[1]


def _history_diff(old: list[Any], new: list[Any]) -> list[DiffLine]:
    """The messages up to the first that differs: a cache reads nothing after it anyway."""
    index = next(
        (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new))
    )
    lines = _diff(old[: index + 1], new[: index + 1])
    later = len(old) - index - 1
    if later > 0:
        lines.append(
            DiffLine(
                kind="@", text=f"… and {later} later message{'s' * (later != 1)} of the previous request"
            )
        )
    return lines


def _diff(before: Any, after: Any) -> list[DiffLine]:
    old = json.dumps(before, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
    new = json.dumps(after, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
    lines = []
    for line in list(difflib.unified_diff(old, new, "previous request", "this request", n=2, lineterm=""))[
        2:
    ]:
        lines.append(DiffLine(kind=line[:1] or " ", text=line[1:] if line[:1] in "+- " else line))
    if len(lines) > MAX_LINES:
        return [*lines[:MAX_LINES], DiffLine(kind="@", text=f"… {len(lines) - MAX_LINES} more lines")]
    return lines
