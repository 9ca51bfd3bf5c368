from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    """A partial index of the tagged answers with a time to first token, for the dashboard's
    TTFT by tag (issue 40): it reads the latest of them, newest first, without walking past the
    untagged ones."""

    dependencies = [("usage", "0029_cache_breaks_stored")]

    operations = [
        migrations.AddIndex(
            model_name="usagerecord",
            index=models.Index(
                condition=models.Q(
                    models.Q(("tags", ""), _negated=True), ("status", "ok"), ("ttft_ms__isnull", False)
                ),
                fields=["team", "created_at", "id"],
                name="usage_team_tagged_ttft",
            ),
        ),
    ]
