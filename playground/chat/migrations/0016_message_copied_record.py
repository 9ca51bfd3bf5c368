from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """A fork's copy of an answer shows the original's usage record (its model and usage line)."""

    dependencies = [("chat", "0015_message_visited_at"), ("usage", "0024_record_variables")]

    operations = [
        migrations.AddField(
            model_name="message",
            name="copied_record",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="usage.usagerecord",
            ),
        ),
    ]
