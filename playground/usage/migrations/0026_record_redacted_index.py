from django.db import migrations, models


class Migration(migrations.Migration):
    """A partial index of the records that were redacted, for the dashboard's redactions chart
    (issue 37): it reads only them, by team and period."""

    dependencies = [
        ("usage", "0025_storage_modes"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="usagerecord",
            index=models.Index(
                condition=models.Q(("redactions__isnull", False)),
                fields=["team", "created_at"],
                name="usage_team_redacted",
            ),
        ),
    ]
