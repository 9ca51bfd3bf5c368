# The rollups by session (issue 40): empty here; `manage.py rebuild_session_rollups` fills
# them for past records.

from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0011_team_upstream_redaction"),
        ("usage", "0030_tagged_ttft_index"),
    ]

    operations = [
        migrations.CreateModel(
            name="UsageSessionHourly",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("session_key", models.CharField(max_length=1040)),
                ("requests", models.BigIntegerField(default=0)),
                ("prompt_tokens", models.BigIntegerField(default=0)),
                ("cached_tokens", models.BigIntegerField(default=0)),
                ("completion_tokens", models.BigIntegerField(default=0)),
                ("total_cost_e10", models.BigIntegerField(default=0)),
                ("peak_prompt_tokens", models.BigIntegerField(default=0)),
                ("first_at", models.DateTimeField()),
                ("last_at", models.DateTimeField()),
                ("bucket", models.DateTimeField(help_text="Start of the UTC hour")),
                (
                    "team",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="accounts.team",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["team", "bucket"], name="usage_session_hourly_bucket")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("team", "session_key", "bucket"), name="one_usage_session_hourly_per_key"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="UsageSessionTotal",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("session_key", models.CharField(max_length=1040)),
                ("requests", models.BigIntegerField(default=0)),
                ("prompt_tokens", models.BigIntegerField(default=0)),
                ("cached_tokens", models.BigIntegerField(default=0)),
                ("completion_tokens", models.BigIntegerField(default=0)),
                ("total_cost_e10", models.BigIntegerField(default=0)),
                ("peak_prompt_tokens", models.BigIntegerField(default=0)),
                ("first_at", models.DateTimeField()),
                ("last_at", models.DateTimeField()),
                (
                    "team",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="accounts.team",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        models.F("team"),
                        models.OrderBy(models.F("prompt_tokens"), descending=True),
                        models.F("session_key"),
                        name="usage_session_total_prompt",
                    ),
                    models.Index(
                        models.F("team"),
                        models.OrderBy(models.F("peak_prompt_tokens"), descending=True),
                        models.F("session_key"),
                        name="usage_session_total_peak",
                    ),
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("team", "session_key"), name="one_usage_session_total_per_key"
                    )
                ],
            },
        ),
    ]
