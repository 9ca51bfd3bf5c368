from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models


def seed(apps, schema_editor):  # type: ignore[no-untyped-def]
    """The seed again: the engine's model is now priced as Kimi K2.5, and list-price labels name
    their prices."""
    from playground.catalog.seed import catalog_seed

    catalog_seed(apps.get_model("catalog", "CatalogModel"), apps.get_model("catalog", "PriceCard"))


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
        migrations.RunPython(seed, migrations.RunPython.noop),
    ]
