import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """Retention (issue 37): a team's days and its runs' state; a record says when retention
    removed its text."""

    dependencies = [
        ("accounts", "0008_audit_end_user_erased"),
        ("usage", "0026_scores"),
    ]

    operations = [
        migrations.AddField(
            model_name="usagerecord",
            name="body_removed_by",
            field=models.CharField(
                blank=True, choices=[("retention", "The team's retention")], db_default="", max_length=10
            ),
        ),
        migrations.AddField(
            model_name="usagerecord",
            name="body_removed_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="TeamRetention",
            fields=[
                (
                    "team",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="retention",
                        serialize=False,
                        to="accounts.team",
                    ),
                ),
                ("body_days", models.PositiveIntegerField(blank=True, null=True)),
                ("record_days", models.PositiveIntegerField(blank=True, null=True)),
                ("records_removed_before", models.DateTimeField(blank=True, null=True)),
                ("run_started_at", models.DateTimeField(blank=True, null=True)),
                ("run_finished_at", models.DateTimeField(blank=True, null=True)),
                ("run_body_cutoff", models.DateTimeField(blank=True, null=True)),
                ("run_record_cutoff", models.DateTimeField(blank=True, null=True)),
                ("run_body_position_at", models.DateTimeField(blank=True, null=True)),
                ("run_body_position_id", models.BigIntegerField(default=0)),
                ("run_bodies_removed", models.PositiveIntegerField(default=0)),
                ("run_records_removed", models.PositiveIntegerField(default=0)),
            ],
        ),
    ]
