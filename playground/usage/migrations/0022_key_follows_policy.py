from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("usage", "0021_record_routing"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="follows_policy",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
