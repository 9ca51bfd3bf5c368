"""Compare over several turns: a comparison's user messages (`ComparisonTurn`) and each column's
answer to each of them, one per run (`ComparisonAnswer`). 0013 makes every existing column's
answer turn 1's; 0014 removes the column's own answer fields."""

from __future__ import annotations

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0011_prompt_variables"),
        ("usage", "0024_record_variables"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ComparisonTurn",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("number", models.PositiveSmallIntegerField()),
                ("content", models.TextField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "comparison",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="turns",
                        to="chat.comparison",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"ordering": ["number"]},
        ),
        migrations.CreateModel(
            name="ComparisonAnswer",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("run", models.PositiveSmallIntegerField()),
                ("content", models.TextField(blank=True)),
                ("reasoning", models.TextField(blank=True)),
                ("tool_calls", models.JSONField(blank=True, default=list)),
                ("structured", models.JSONField(blank=True, null=True)),
                ("refusal", models.TextField(blank=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("ended_at", models.DateTimeField(blank=True, null=True)),
                (
                    "column",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="answers",
                        to="chat.comparisoncolumn",
                    ),
                ),
                (
                    "usage_record",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="usage.usagerecord",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "turn",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="answers",
                        to="chat.comparisonturn",
                    ),
                ),
            ],
            options={"ordering": ["turn_id", "run", "column_id"]},
        ),
        migrations.AddConstraint(
            model_name="comparisonturn",
            constraint=models.UniqueConstraint(
                fields=("comparison", "number"), name="chat_comparison_turn_number"
            ),
        ),
        migrations.AddConstraint(
            model_name="comparisonanswer",
            constraint=models.UniqueConstraint(
                fields=("turn", "column", "run"), name="chat_comparison_answer_run"
            ),
        ),
    ]
