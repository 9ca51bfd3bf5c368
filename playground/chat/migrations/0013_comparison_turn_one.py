"""Each existing comparison's prompt becomes its turn 1, and each column's stored answer that
turn's answer (run = the column's attempt: the earlier runs' answers were never kept, their
records were). Reversed: turn 1's newest answer goes back onto its column."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def turns_from_prompts(apps: Any, schema_editor: Any) -> None:
    Comparison = apps.get_model("chat", "Comparison")
    ComparisonColumn = apps.get_model("chat", "ComparisonColumn")
    ComparisonTurn = apps.get_model("chat", "ComparisonTurn")
    ComparisonAnswer = apps.get_model("chat", "ComparisonAnswer")
    for comparison in Comparison.objects.iterator():
        turn = ComparisonTurn.objects.create(
            comparison=comparison, number=1, content=comparison.prompt, user_id=comparison.user_id
        )
        ComparisonTurn.objects.filter(pk=turn.pk).update(created_at=comparison.created_at)
        columns = ComparisonColumn.objects.filter(comparison=comparison, attempt__gt=0).select_related(
            "usage_record"
        )
        for column in columns:
            record = column.usage_record
            when = record.created_at if record is not None else comparison.created_at
            answer = ComparisonAnswer.objects.create(
                turn=turn,
                column=column,
                run=column.attempt,
                user_id=record.user_id if record is not None else comparison.user_id,
                content=column.content,
                reasoning=column.reasoning,
                tool_calls=column.tool_calls,
                structured=column.structured,
                usage_record=record,
                ended_at=when,
            )
            ComparisonAnswer.objects.filter(pk=answer.pk).update(created_at=when)


def answers_back_onto_columns(apps: Any, schema_editor: Any) -> None:
    ComparisonAnswer = apps.get_model("chat", "ComparisonAnswer")
    for answer in ComparisonAnswer.objects.filter(turn__number=1).order_by("run").iterator():
        column = answer.column
        column.content, column.reasoning = answer.content, answer.reasoning
        column.tool_calls, column.structured = answer.tool_calls, answer.structured
        column.usage_record_id = answer.usage_record_id
        column.save(update_fields=["content", "reasoning", "tool_calls", "structured", "usage_record"])


class Migration(migrations.Migration):
    dependencies = [("chat", "0012_comparison_turns")]

    operations = [migrations.RunPython(turns_from_prompts, answers_back_onto_columns)]
