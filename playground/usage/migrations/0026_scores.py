from __future__ import annotations

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """Scores on usage records (issue 39): people's on the record page, applications' through
    `POST /v1/scores`; indexed for the dashboard's chart by preset version (team, record time)
    and the request log's filter (team, kind, value, record)."""

    dependencies = [
        ("accounts", "0007_team_store_mode"),
        ("usage", "0025_storage_modes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Score",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "origin",
                    models.CharField(
                        choices=[
                            ("person", "A person, on the record page"),
                            ("api", "An API key, through the gateway"),
                        ],
                        max_length=10,
                    ),
                ),
                ("name", models.CharField(blank=True, default="", max_length=64)),
                (
                    "kind",
                    models.CharField(
                        choices=[("thumbs", "Thumbs (1 up, 0 down)"), ("rating", "Rating (1-5)")],
                        max_length=10,
                    ),
                ),
                ("value", models.PositiveSmallIntegerField()),
                ("comment", models.TextField(blank=True, default="")),
                ("preset_version_id", models.BigIntegerField(blank=True, null=True)),
                ("record_created_at", models.DateTimeField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "api_key",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="usage.apikey",
                    ),
                ),
                (
                    "record",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="scores",
                        to="usage.usagerecord",
                    ),
                ),
                (
                    "team",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="accounts.team"
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
            options={
                "ordering": ["created_at", "id"],
                "indexes": [
                    models.Index(fields=["team", "record_created_at"], name="score_team_record_time"),
                    models.Index(fields=["team", "kind", "value", "record"], name="score_team_kind_value"),
                ],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("origin", "person"), ("user__isnull", False)),
                        fields=("record", "user"),
                        name="one_score_per_person_and_record",
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("api_key__isnull", False), ("origin", "api")),
                        fields=("record", "api_key", "name"),
                        name="one_score_per_key_name_and_record",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("kind", "thumbs"), ("value__lte", 1)),
                            models.Q(("kind", "rating"), ("value__gte", 1), ("value__lte", 5)),
                            _connector="OR",
                        ),
                        name="score_value_in_range",
                    ),
                ],
            },
        ),
    ]
