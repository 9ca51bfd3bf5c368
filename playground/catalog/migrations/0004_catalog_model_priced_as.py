from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("catalog", "0003_team_price_overrides")]

    operations = [
        migrations.AddField(
            model_name="catalogmodel",
            name="priced_as",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="priced_models",
                to="catalog.catalogmodel",
            ),
        ),
    ]
