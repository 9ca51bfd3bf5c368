"""A usage record keeps its conversation's id as a plain indexed column, no foreign key.

Usage stands below chat (docs/architecture.md): records name what caused them through
`playground.usage.sources`. The column, its data and its index stay as they are; only the
constraint goes (on SQLite the table is rebuilt without it). A conversation deleted from now
on leaves its records' ids in place (it used to set them to NULL).

This migration depends on usage alone: the chat model it reads in its first step is already
in the state through 0001. After it, the usage models refer to no chat model, so no usage
migration needs chat again.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("usage", "0011_budget_models_from_accounts"),
    ]

    operations = [
        # Drops the foreign key constraint and keeps the column and its index.
        migrations.AlterField(
            model_name="usagerecord",
            name="conversation",
            field=models.ForeignKey(
                blank=True,
                null=True,
                db_constraint=False,
                on_delete=models.DO_NOTHING,
                related_name="+",
                to="chat.conversation",
            ),
        ),
        # The same column, now a plain id: the database already holds it as the state describes
        # (a bigint named conversation_id, with the same index name).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="usagerecord", name="conversation"),
                migrations.AddField(
                    model_name="usagerecord",
                    name="conversation_id",
                    field=models.BigIntegerField(blank=True, db_index=True, null=True),
                ),
            ],
        ),
    ]
