from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("usage", "0020_cache_write_tokens_and_cost"),
    ]

    operations = [
        migrations.AddField(
            model_name="usagerecord",
            name="route_rule",
            field=models.CharField(blank=True, db_default="", max_length=100),
        ),
        migrations.AddField(
            model_name="usagerecord",
            name="route_fell_back",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="usagerecord",
            name="route_downgraded",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="usagerecord",
            name="routing",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
