from django.db import migrations, models

STORE_MODES = [
    ("full", "Full: the text as sent"),
    ("redacted", "Redacted: sensitive values replaced"),
    ("metadata", "Metadata only: no prompt or answer text"),
]
KEY_STORE_MODES = [("", "The team's"), *STORE_MODES]


class Migration(migrations.Migration):
    """Storage modes (issue 37). Keys made before it follow their team's mode (""), which stays
    `full` until the team changes it; keys made from now on are `redacted`."""

    dependencies = [
        ("usage", "0024_record_variables"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="store_mode",
            field=models.CharField(
                blank=True, choices=KEY_STORE_MODES, db_default="", default="", max_length=10
            ),
        ),
        migrations.AlterField(
            model_name="apikey",
            name="store_mode",
            field=models.CharField(
                blank=True, choices=KEY_STORE_MODES, db_default="redacted", default="redacted", max_length=10
            ),
        ),
        migrations.AddField(
            model_name="usagerecord",
            name="store_mode",
            field=models.CharField(choices=STORE_MODES, db_default="full", default="full", max_length=10),
        ),
        migrations.AddField(
            model_name="usagerecord",
            name="redactions",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
