"""A column's answers are its `ComparisonAnswer`s now (0013 moved them there)."""

from __future__ import annotations

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("chat", "0013_comparison_turn_one")]

    operations = [
        migrations.RemoveField(model_name="comparisoncolumn", name=name)
        for name in ("content", "reasoning", "structured", "tool_calls", "usage_record")
    ]
