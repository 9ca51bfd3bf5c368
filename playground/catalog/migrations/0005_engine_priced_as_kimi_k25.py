from __future__ import annotations

from django.db import migrations


def seed(apps, schema_editor):  # type: ignore[no-untyped-def]
    """The seed again: the engine's model is now priced as Kimi K2.5, and list-price labels name
    their prices. (Apart from the field's migration: PostgreSQL refuses to build the field's
    index after rows changed in the same transaction.)"""
    from playground.catalog.seed import catalog_seed

    catalog_seed(apps.get_model("catalog", "CatalogModel"), apps.get_model("catalog", "PriceCard"))


class Migration(migrations.Migration):
    dependencies = [("catalog", "0004_catalog_model_priced_as")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
