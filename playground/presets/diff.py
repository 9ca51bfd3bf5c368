"""Two versions of a preset, field by field: which fields changed, and a line diff of each.

Each field is shown as text: the system prompt as written, the rest as indented JSON, so a
changed tool parameter or temperature reads as one changed line. Pure functions; the page
renders the rows (no HTML is built here).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any, Literal

from playground.presets.setup import FIELDS

LABELS = {
    "connection": "Connection",
    "model": "Model",
    "system_prompt": "System prompt",
    "variables": "Variables (with defaults)",
    "tools": "Tools (with mocks)",
    "tool_choice": "Tool choice",
    "parallel_tool_calls": "Parallel tool calls",
    "auto_mock_steps": "Auto-mock steps",
    "response_format": "Response format",
    "parameters": "Parameters",
    "affinity": "Session affinity",
}
Kind = Literal["same", "changed", "removed", "added"]


@dataclass(frozen=True)
class SideBySideRow:
    kind: Kind
    old: str | None  # None: no line on this side
    new: str | None
    old_number: int | None
    new_number: int | None


@dataclass(frozen=True)
class FieldDiff:
    name: str
    label: str
    changed: bool
    rows: list[SideBySideRow]
    unified: list[tuple[Kind, str]]  # ("added", "+ line"), ("removed", "- line"), ("same", "  line")


def field_text(name: str, value: Any) -> str:
    if name == "system_prompt" and isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=name == "parameters")


def setups_diff(old: dict[str, Any], new: dict[str, Any], *, context: int = 3) -> list[FieldDiff]:
    """Every field of two setup documents (as stored on versions), changed or not, in order."""
    return [
        text_diff(
            name,
            LABELS[name],
            field_text(name, _value(old, name)),
            field_text(name, _value(new, name)),
            context,
        )
        for name in FIELDS
    ]


def _value(document: dict[str, Any], name: str) -> Any:
    """A field of a stored document; versions saved before variables existed have none."""
    return document.get(name, [] if name == "variables" else None)


def text_diff(name: str, label: str, old_text: str, new_text: str, context: int = 3) -> FieldDiff:
    """Two texts line by line, side by side and unified (a preset's field, a routing policy)."""
    old_lines, new_lines = old_text.splitlines(), new_text.splitlines()
    rows: list[SideBySideRow] = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows += [
                SideBySideRow("same", old_lines[i], new_lines[j], i + 1, j + 1)
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            ]
            continue
        for offset in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + offset, j1 + offset
            old_line = old_lines[i] if i < i2 else None
            new_line = new_lines[j] if j < j2 else None
            kind: Kind = (
                "changed"
                if old_line is not None and new_line is not None
                else ("removed" if new_line is None else "added")
            )
            rows.append(
                SideBySideRow(
                    kind,
                    old_line,
                    new_line,
                    i + 1 if old_line is not None else None,
                    j + 1 if new_line is not None else None,
                )
            )
    unified: list[tuple[Kind, str]] = []
    for line in list(difflib.unified_diff(old_lines, new_lines, lineterm="", n=context))[2:]:
        if line.startswith("@@"):
            unified.append(("same", line))
        elif line.startswith("+"):
            unified.append(("added", f"+ {line[1:]}"))
        elif line.startswith("-"):
            unified.append(("removed", f"- {line[1:]}"))
        else:
            unified.append(("same", f"  {line[1:]}"))
    return FieldDiff(name=name, label=label, changed=old_text != new_text, rows=rows, unified=unified)
