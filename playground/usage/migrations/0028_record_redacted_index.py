from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """A partial index of the records that were redacted, for the dashboard's redactions chart
    (issue 37): it reads only them, by team and period."""

    dependencies = [
        ("accounts", "0011_team_upstream_redaction"),
        ("catalog", "0008_engine_quality_model"),
        ("providers", "0003_connection_listed_windows"),
        ("usage", "0027_retention"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
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
