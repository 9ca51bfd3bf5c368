"""Display of comparison columns: the target, the answer and its figures, ready to print.

The figures are the chat's own (`presenters.usage_line`): tokens in / cached / out, the
cost with the card that priced it, TTFT and latency, and the schema check of a JSON answer.
Pure functions over columns whose target and record are loaded (`comparison_columns`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.utils.safestring import SafeString

from playground.chat.compare.models import ComparisonColumn
from playground.chat.forms import connection_label
from playground.chat.presenters.messages import StructuredView, structured_view
from playground.chat.presenters.rendering import render_markdown
from playground.chat.presenters.usage import SEPARATOR, UsageLine, usage_line

PARAMETER_LABELS = {
    "temperature": "temperature",
    "max_tokens": "max tokens",
    "top_p": "top p",
    "seed": "seed",
}


@dataclass(frozen=True)
class ColumnView:
    id: int
    comparison_id: int
    key: str  # the DOM key of its streaming answer: answer-<key>-text
    title: str  # "Target 1"
    model_id: str
    connection: str
    connection_deleted: bool
    settings: str  # "temperature 0.2 · affinity on"
    html: SafeString
    calls: tuple[str, ...]  # the tools the answer called, by name
    structured: StructuredView | None
    usage: UsageLine | None
    can_continue: bool
    continued_as: int | None


def column_key(column_id: int) -> str:
    return f"c{column_id}"


def column_view(column: ComparisonColumn) -> ColumnView:
    record = column.usage_record
    answered = record is not None and bool(column.content or column.tool_calls)
    return ColumnView(
        id=column.pk,
        comparison_id=column.comparison_id,
        key=column_key(column.pk),
        title=f"Target {column.position + 1}",
        model_id=column.model_id,
        connection=connection_label(column.connection) if column.connection else "deleted connection",
        connection_deleted=column.connection_id is None,
        settings=target_settings(column),
        html=render_markdown(column.content),
        calls=tuple(call.get("name", "") for call in column.tool_calls),
        structured=structured_view(column.content, column.structured) if column.structured else None,
        usage=usage_line(record) if record is not None else None,
        can_continue=answered and column.connection_id is not None,
        continued_as=column.continued_as_id,
    )


def column_views(columns: Iterable[ComparisonColumn]) -> list[ColumnView]:
    return [column_view(column) for column in columns]


def target_settings(column: ComparisonColumn) -> str:
    """The parameters a column sets, then its affinity: "temperature 0.2 · affinity on"."""
    parts = [
        f"{label} {column.parameters[name]}"
        for name, label in PARAMETER_LABELS.items()
        if column.parameters.get(name) is not None
    ]
    parts.append(f"affinity {'on' if column.use_affinity else 'off'}")
    return SEPARATOR.join(parts)
