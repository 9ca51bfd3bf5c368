from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0010_message_written"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="variables",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="comparison",
            name="variables",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
