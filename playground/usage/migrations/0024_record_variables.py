from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("usage", "0023_record_routed_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="usagerecord",
            name="variables",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
