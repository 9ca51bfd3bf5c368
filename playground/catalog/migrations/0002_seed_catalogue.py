from __future__ import annotations

from django.db import migrations


def seed(apps, schema_editor):  # type: ignore[no-untyped-def]
    from playground.catalog.seed import catalog_seed

    catalog_seed(apps.get_model("catalog", "CatalogModel"), apps.get_model("catalog", "PriceCard"))


class Migration(migrations.Migration):
    dependencies = [("catalog", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
