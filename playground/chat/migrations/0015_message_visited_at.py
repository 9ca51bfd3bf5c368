from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    """When a branch switch last put a message at the end of the branch on screen: the arrows come
    back to the leaf the user was on last."""

    dependencies = [("chat", "0014_comparison_column_answer_fields_removed")]

    operations = [
        migrations.AddField(
            model_name="message",
            name="visited_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
