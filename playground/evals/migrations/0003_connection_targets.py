# An experiment's target may be a connection's model with its own settings (as a Compare column),
# besides a preset version. Existing targets are preset versions: `kind` defaults to "preset" and
# their new fields stay empty, which the constraint asks of a preset version's target.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0002_check_results"),
        ("providers", "0003_connection_listed_windows"),
    ]

    operations = [
        migrations.AddField(
            model_name="experimenttarget",
            name="kind",
            field=models.CharField(
                choices=[("preset", "Preset version"), ("connection", "Connection and model")],
                default="preset",
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="experimenttarget",
            name="connection",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="providers.providerconnection",
            ),
        ),
        migrations.AddField(
            model_name="experimenttarget",
            name="model_id",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name="experimenttarget",
            name="parameters",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="experimenttarget",
            name="system_prompt",
            field=models.TextField(blank=True),
        ),
        migrations.AddConstraint(
            model_name="experimenttarget",
            constraint=models.CheckConstraint(
                condition=models.Q(("kind", "preset"), ("model_id", ""))
                | models.Q(("kind", "connection"), models.Q(("model_id", ""), _negated=True)),
                name="connection_target_names_its_model",
            ),
        ),
    ]
