from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("usage", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="usagerecord",
            name="usage_implausible",
            field=models.BooleanField(
                default=False,
                help_text="The provider's figures were absurd (not finite, negative or out of range): "
                "the tokens are estimated and raw_usage keeps what it sent",
            ),
        ),
    ]
